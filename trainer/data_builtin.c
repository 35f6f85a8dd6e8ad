/* data_builtin.c — the built-in training corpus: English-like sentences from
 * a small word list and grammar, generated from a seed.
 *
 * Why this shape: a run with no data file must still show learning within a
 * few hundred steps of a tiny model. Words from a fixed list make most
 * letters predictable from the previous ones, the grammar makes word order
 * predictable, and "a/an", verb agreement and capitals after ". " add
 * structure a small transformer picks up. All bytes are ASCII (< 128). */
#include "trainer/data.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CORPUS_MIN ((size_t)1 << 20)
#define SENTENCE_MAX 256

static const char *const nouns[] = {"cat",    "dog",   "bird",   "fox",     "horse",    "girl",
                                    "boy",    "child", "farmer", "teacher", "river",    "tree",
                                    "house",  "garden", "apple", "owl",     "elephant", "island"};
static const char *const adjectives[] = {"small", "big",   "old",    "young", "red",   "green",
                                         "quiet", "happy", "clever", "angry", "orange", "empty"};
/* base forms; the third person is made by rule (see third_person) */
static const char *const verbs_t[] = {"see",   "like",  "find",  "chase", "watch",
                                      "help",  "follow", "carry", "paint", "remember"};
static const char *const verbs_i[] = {"sleep", "run", "sing", "wait", "laugh", "dream", "work", "rest"};
static const char *const adverbs[] = {"quickly", "slowly", "quietly", "today", "again", "at night",
                                      "in the morning"};
static const char *const prepositions[] = {"near", "under", "behind", "with", "beside"};
static const char *const determiners[] = {"the", "this", "that", "every", "my", "your"};

#define PICK(rng, list) (list[next_u64(rng) % (sizeof list / sizeof list[0])])

static uint64_t next_u64(uint64_t *s) { /* splitmix64 */
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

typedef struct {
    char text[SENTENCE_MAX];
    size_t len;
} sentence;

static void add(sentence *s, const char *word) {
    size_t n = strlen(word);
    if (s->len + n + 1 >= SENTENCE_MAX) return; /* cannot happen with these lists */
    if (s->len && s->text[s->len - 1] != ' ') s->text[s->len++] = ' ';
    memcpy(s->text + s->len, word, n);
    s->len += n;
    s->text[s->len] = 0;
}

static int is_vowel(char c) { return c == 'a' || c == 'e' || c == 'i' || c == 'o' || c == 'u'; }

/* see -> sees, watch -> watches, carry -> carries */
static void third_person(const char *base, char *out, size_t len) {
    size_t n = strlen(base);
    char last = base[n - 1], prev = n > 1 ? base[n - 2] : 0;
    if (last == 'y' && !is_vowel(prev))
        snprintf(out, len, "%.*sies", (int)(n - 1), base);
    else if (last == 's' || last == 'x' || (last == 'h' && (prev == 'c' || prev == 's')))
        snprintf(out, len, "%ses", base);
    else
        snprintf(out, len, "%ss", base);
}

static void noun_phrase(sentence *s, uint64_t *rng) {
    int with_adj = next_u64(rng) % 3 == 0;
    const char *adj = with_adj ? PICK(rng, adjectives) : NULL;
    const char *noun = PICK(rng, nouns);
    if (next_u64(rng) % 3 == 0) /* indefinite article agrees with the next word */
        add(s, is_vowel((adj ? adj : noun)[0]) ? "an" : "a");
    else
        add(s, PICK(rng, determiners));
    if (adj) add(s, adj);
    add(s, noun);
}

static void make_sentence(sentence *s, uint64_t *rng) {
    char verb[32];
    s->len = 0;
    s->text[0] = 0;
    switch (next_u64(rng) % 4) {
    case 0: /* the old fox chases a bird near the river. */
        noun_phrase(s, rng);
        third_person(PICK(rng, verbs_t), verb, sizeof verb);
        add(s, verb);
        noun_phrase(s, rng);
        if (next_u64(rng) % 2) {
            add(s, PICK(rng, prepositions));
            noun_phrase(s, rng);
        }
        add(s, ".");
        break;
    case 1: /* my dog sleeps quietly. */
        noun_phrase(s, rng);
        third_person(PICK(rng, verbs_i), verb, sizeof verb);
        add(s, verb);
        if (next_u64(rng) % 2) add(s, PICK(rng, adverbs));
        add(s, ".");
        break;
    case 2: /* the girl sings and an owl waits. */
        noun_phrase(s, rng);
        third_person(PICK(rng, verbs_i), verb, sizeof verb);
        add(s, verb);
        add(s, "and");
        noun_phrase(s, rng);
        third_person(PICK(rng, verbs_i), verb, sizeof verb);
        add(s, verb);
        add(s, ".");
        break;
    default: /* does the farmer help a child? */
        add(s, "does");
        noun_phrase(s, rng);
        add(s, PICK(rng, verbs_t));
        noun_phrase(s, rng);
        add(s, "?");
        break;
    }
    /* punctuation attaches to the last word */
    if (s->len >= 2 && s->text[s->len - 2] == ' ') {
        s->text[s->len - 2] = s->text[s->len - 1];
        s->len--;
        s->text[s->len] = 0;
    }
    s->text[0] = (char)(s->text[0] - 'a' + 'A');
}

uint8_t *ms_data_builtin_corpus(uint64_t seed, size_t *len) {
    size_t cap = CORPUS_MIN + 2 * SENTENCE_MAX, n = 0;
    uint8_t *buf = malloc(cap);
    if (!buf) return NULL;
    uint64_t rng = seed ^ 0x6d656d73706c6974ull; /* "memsplit": seed 0 is fine too */
    int in_paragraph = 0, paragraph_len = 0;
    while (n < CORPUS_MIN) {
        sentence s;
        make_sentence(&s, &rng);
        if (in_paragraph) buf[n++] = ' ';
        memcpy(buf + n, s.text, s.len);
        n += s.len;
        in_paragraph = 1;
        if (++paragraph_len >= 4 + (int)(next_u64(&rng) % 5)) {
            buf[n++] = '\n';
            in_paragraph = 0;
            paragraph_len = 0;
        }
    }
    *len = n;
    return buf;
}
