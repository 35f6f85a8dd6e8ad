#!/usr/bin/env bash
# render.sh — the HTML report in a real browser: makes a CPU demo database
# with $MEMSPLIT (a trial that runs out of memory, its plan, a trial that
# fits) and a doctor run of a user's program under bf16 autocast
# (program_db.sh), writes the reports with `memsplit report --html`, and has
# Debian's chromium (headless, no network, a fresh profile) load each page,
# render it to PNG in the light and the dark scheme and to PDF (print
# styles). The program's page, as the browser read it, must lead with its
# answer in module paths and draw its master weights as master.
# Fails on any console message (the page has no script, so any message is an
# error: a blocked fetch, a CSP violation), on a page that does not load, or
# on a missing or empty PNG/PDF. Ends with "browser: N passed, N failed".
#
# Usage: MEMSPLIT=build/memsplit tests/browser/render.sh [OUT_DIR]
#   OUT_DIR keeps the pages and images (default: a temporary folder, removed).
# Installs chromium with scripts/deps.sh --browser when it is missing.
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
M=${MEMSPLIT:-$root/build/memsplit}
pass=0; fail=0
ok()  { pass=$((pass+1)); echo "ok    $1"; }
bad() { fail=$((fail+1)); echo "FAIL  $1"; [ -n "${2:-}" ] && echo "$2" | head -20 | sed 's/^/      /'; }
finish() { echo "browser: $pass passed, $fail failed"; [ "$fail" -eq 0 ]; exit $?; }

if [ ! -x "$M" ]; then bad "memsplit binary '$M' (set MEMSPLIT)"; finish; fi
if ! command -v chromium >/dev/null; then
    "$root/scripts/deps.sh" --browser || { bad "installing chromium (scripts/deps.sh --browser)"; finish; }
fi
if ! command -v chromium >/dev/null; then bad "chromium is not installed"; finish; fi

if [ -n "${1:-}" ]; then T=$1; mkdir -p "$T"; else T=$(mktemp -d); trap 'rm -rf "$T"' EXIT; fi
rm -f "$T"/demo.db*

# ---- the demo database (CPU) -------------------------------------------------
"$M" profile --preset seed17-cpu --precision all --batch 4,2 --db "$T/demo.db" >"$T/profile.log" 2>&1
rc=$?
if [ $rc -eq 3 ]; then ok "profile seed17-cpu ran out of memory as meant (exit 3)"
else bad "profile seed17-cpu: exit $rc, wanted 3" "$(tail -5 "$T/profile.log")"; fi
if "$M" plan --db "$T/demo.db" --run 1 --gpus 2 --gpu-mem 20MiB >"$T/plan.log" 2>&1; then ok "plan stored"
else bad "plan --db" "$(tail -5 "$T/plan.log")"; fi
if "$M" profile --preset tiny --db "$T/demo.db" >"$T/tiny.log" 2>&1; then ok "profile tiny"
else bad "profile tiny" "$(tail -5 "$T/tiny.log")"; fi

# ---- one chromium run; its console messages go to $T/NAME.log -----------------
# Chromium's own processes sometimes die on a loaded 2-core machine ("Socket
# closed prematurely" from its zygote: seen once in CI, the page never
# loaded); such a run is tried once more, with a fresh profile, and only the
# last attempt's output and log count. A page error is never retried away:
# the checks read what the second run printed.
chrome_once() {
    local name=$1; shift
    timeout 60 chromium --headless --no-sandbox --disable-gpu --no-first-run \
        --disable-background-networking --disable-component-update --disable-sync \
        --disable-default-apps --disable-extensions --no-default-browser-check \
        --user-data-dir="$(mktemp -d "$T/profile.XXXXXX")" \
        --enable-logging=stderr --v=0 --hide-scrollbars "$@" >"$T/$name.out" 2>"$T/$name.log"
}
chrome() {
    local name=$1 rc; shift
    chrome_once "$name" "$@"; rc=$?
    if [ $rc -ne 0 ] || grep -q 'zygote_communication_linux.*Socket closed prematurely' "$T/$name.log"; then
        mv "$T/$name.log" "$T/$name.first.log"
        chrome_once "$name" "$@"; rc=$?
    fi
    cat "$T/$name.out"
    return $rc
}

# Any console line is a failure: the page runs no script, so only an error
# (a blocked load, a policy violation) can write one.
console_clean() {
    local name=$1 msgs
    msgs=$(grep -E 'CONSOLE|Uncaught|Refused to|violates the following' "$T/$name.log")
    if [ -z "$msgs" ]; then ok "$name: no console messages"; else bad "$name: console messages" "$msgs"; fi
}

# A PNG: the signature, and more than a blank page's few kilobytes.
png_ok() {
    local name=$1 file=$2 size
    size=$(stat -c %s "$file" 2>/dev/null || echo 0)
    if [ "$size" -gt 20000 ] && [ "$(head -c 8 "$file" | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ]; then
        ok "$name: $(basename "$file") ($size bytes)"
    else
        bad "$name: $(basename "$file") missing, not a PNG or nearly empty ($size bytes)" "$(tail -3 "$T/$name.log")"
    fi
}

# page TAG [--run ID]: without --run, the newest top-level run; of $DB
# (default the demo database).
page() {
    local tag=$1 html="$T/report-$1.html"; shift
    if "$M" report --db "${DB:-$T/demo.db}" "$@" --html "$html" 2>"$T/report-$tag.err" && [ -s "$html" ]; then
        ok "report $* --html"
    else
        bad "report $* --html" "$(cat "$T/report-$tag.err")"; return
    fi
    local url="file://$html"
    chrome "$tag-dom" --dump-dom "$url" >"$T/$tag.dom"
    if grep -q "memsplit report: run" "$T/$tag.dom" && grep -q '</html>' "$T/$tag.dom" &&
       [ "$(grep -c '<svg' "$T/$tag.dom")" -ge 2 ]; then
        ok "$tag: page loads (title, charts, end)"
    else
        bad "$tag: page did not load whole" "$(tail -3 "$T/$tag-dom.log")"
    fi
    console_clean "$tag-dom"
    chrome "$tag-light" --screenshot="$T/$tag-light.png" --window-size=1200,2400 "$url" >/dev/null
    png_ok "$tag-light" "$T/$tag-light.png"
    console_clean "$tag-light"
    chrome "$tag-dark" --force-dark-mode --screenshot="$T/$tag-dark.png" --window-size=1200,2400 "$url" >/dev/null
    png_ok "$tag-dark" "$T/$tag-dark.png"
    chrome "$tag-print" --no-pdf-header-footer --print-to-pdf="$T/$tag.pdf" "$url" >/dev/null
    if [ "$(head -c 5 "$T/$tag.pdf" 2>/dev/null)" = "%PDF-" ] && [ "$(stat -c %s "$T/$tag.pdf")" -gt 20000 ]; then
        ok "$tag: printed to PDF ($(stat -c %s "$T/$tag.pdf") bytes)"
    else
        bad "$tag: no PDF" "$(tail -3 "$T/$tag-print.log")"
    fi
}

page oom --run 1    # the trial that ran out, with the plan made from it
page fits           # the newest: the trial that fit

# ---- a doctor run of a user's program (tests/bridge/models.py, bf16 autocast) --
if MEMSPLIT=$M "$here/program_db.sh" "$T/program.db" 2>"$T/program.log"; then
    ok "program: doctor run recorded (trial out of memory, plan, training)"
    DB=$T/program.db page program
    dom=$T/program.dom
    # in the DOM as the browser parsed it: the answer before the trial, in module paths
    ans=$(grep -n 'id="answer"' "$dom" | head -1 | cut -d: -f1)
    trial=$(grep -n 'id="trial"' "$dom" | head -1 | cut -d: -f1)
    if [ -n "$ans" ] && [ -n "$trial" ] && [ "$ans" -lt "$trial" ] &&
       grep -q 'OUT OF MEMORY in the forward pass of transformers\.[0-9]' "$dom" &&
       grep -q 'data-k="modules" class="wrap">segment1, transformers\.0-' "$dom" &&
       grep -q 'id="t-answer-1"' "$dom"; then
        ok "program: the page leads with its answer (the module, the placement, the peaks)"
    else
        bad "program: no answer at the top" "$(grep -o 'id="answer[^>]*>' "$dom" | head -3)"
    fi
    # chart (a): its legend and its table have master (the fp32 weights), as the diagnosis does
    legend=$(sed -n '/<figure id="fig-a-2">/,/<svg/p' "$dom")
    if echo "$legend" | grep -q 'c-master' && grep -q '<th>master</th>' "$dom"; then
        ok "program: chart (a) draws the master weights as master"
    else
        bad "program: chart (a) has no master" "$(echo "$legend" | grep -o 'sw c-[a-z]*' | tr '\n' ' ')"
    fi
    if grep -q 'sequence 0\|d_model 0' "$dom" || grep -q '<dt>devices</dt><dd>-' "$dom" ||
       ! grep -q 'tokens/s not measured' "$dom"; then
        bad "program: GPT-only fields, a device list missing, or tokens/s made up" \
            "$(grep -o 'sequence 0[^<]*\|<dt>devices</dt><dd>[^<]*' "$dom" | head -3)"
    else
        ok "program: its own module paths, precision, batch and devices; tokens/s not measured"
    fi
else
    bad "program: doctor run (program_db.sh)" "$(tail -5 "$T/program.log")"
fi

rm -rf "$T"/profile.*    # chromium's throw-away profiles
[ -n "${1:-}" ] && echo "pages and images in $T"
finish
