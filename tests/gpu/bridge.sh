#!/usr/bin/env bash
# bridge.sh — the PyTorch bridge on a GPU (torch 2.x, Lightning, transformers):
#  - a small plain PyTorch run: rows against what torch itself counted
#    (parameters, gradients, optimizer state exact; the profile's allocated
#    peak within 1% of max_memory_allocated); a recorded event stream ($OUT)
#  - the reference model in Lightning, 16-mixed and bf16-mixed, under an
#    emulated 40 GiB: the module memsplit names equals the one the program
#    dies in under the ballast alone; the uncapped pass's peak within 1% of
#    torch's own
#  - HF GPT2LMHeadModel in Lightning: a run that fits, and one under a cap
#  - torch.compile refused with its message; expandable_segments
#  - doctor: the reference model and HF GPT-2 in Lightning over 40 GiB devices
#  - resume: a rerun that runs out, restarted, Lightning resuming from last.ckpt;
#    HF's save_pretrained into checkpoint-N folders, transformers imported
#    before torch: the trial writes none of the program's checkpoints
#  - overhead: step time plain, --diagnose-only and with the tensor trace
#  - shapes: tests/bridge/shapes.py's TorchScript,
#    spectral_norm, gradient-penalty, ModuleDict, PINN, accumulation, deep-copy and
#    saved-whole programs on cuda:0, diagnosed and split
#  - realdev: a program split over two real, distinct devices on one GPU
#    (cuda:0 and cpu): a plain fp32 loop, Lightning 32-true, a PINN
#    (create_graph across the devices) and an LSTM tagger on packed
#    sequences trained by
#    doctor with the unsplit run's losses, the GPU stage's peak within 2%;
#    the same plan on virtual devices crosses at the same places; a module
#    moving tensors itself is refused; 16-mixed with a CPU stage is refused
#  - programs (only when asked: SECTIONS=programs): torchvision ResNet-152
#    (fp16 AMP, batch 384), HF T5 (bf16) and HF Llama in Lightning (bf16-mixed,
#    4 x 2048) each run alone, profiled under a CAP it dies in (exit 3, the
#    OOM's module named: the one it dies in under the ballast alone) and
#    trained by doctor over two devices of CAP on
#    cuda:0: the split's losses against the alone run's (2e-2 relative), each
#    device's measured peak against the plan (2%); the runs' output, JSON and
#    databases in $OUT (programs_*)
# Needs $MEMSPLIT; PY (default python3) is the interpreter with torch.
# SECTIONS (default "small ref hf misc doctor resume realdev overhead shapes") picks parts.
set -u
M=${MEMSPLIT:?}
PY=${PY:-python3}
OUTD=${OUT:-/tmp}
mkdir -p "$OUTD" || { echo "bridge.sh: cannot make $OUTD" >&2; exit 2; }
HERE=$(cd "$(dirname "$0")" && pwd)
B=$HERE/../bridge
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
SECTIONS=${SECTIONS:-small ref hf misc doctor resume realdev overhead shapes}
pass=0; fail=0
ok()  { echo "ok   $1"; pass=$((pass+1)); }
bad() { echo "FAIL $1"; shift; for l in "$@"; do echo "  | $l"; done; fail=$((fail+1)); }
want() { case " $SECTIONS " in *" $1 "*) return 0;; esac; return 1; }
js() { "$PY" -c "import json,sys; d=json.load(open('$1')); print($2)" 2>&1; }
within() { "$PY" -c "import sys; a,b,tol=float('$1'),float('$2'),float('$3'); sys.exit(0 if abs(a-b) <= tol*abs(b) else 1)"; }

if want small; then
    # plain PyTorch, small, fits: exact tensor bytes, the peak within 1%
    "$M" profile --no-record-pass --json --record-events "$OUTD/fixture_ref_gpu.tsv" -- "$PY" "$B/ref_model.py" --blocks 4 --dim 512 \
        --heads 8 --seq 256 --batch 8 --vocab 4096 --steps 4 --amp --report "$T/rep.json" > "$T/p.json" 2> "$T/p.err"
    rc=$?
    if [ $rc = 0 ]; then ok "small ref fits (exit 0)"; else bad "small ref: exit $rc" "$(tail -5 "$T/p.err")"; fi
    echo "  profile: $(js "$T/p.json" "[(r['name'], r['source'], r['param'], r['master'], r['grad'], r['optim'], r['act']) for r in d['layers']]")"
    echo "  torch:   $(cat "$T/rep.json" 2>/dev/null)"
    st=$(js "$T/p.json" "sum(r['master'] + r['param'] * 0 for r in d['layers']), sum(r['grad'] for r in d['layers']), sum(r['optim'] for r in d['layers'])")
    tr=$(js "$T/rep.json" "d['param'], d['grad'], d['optim']")
    echo "  static (master, grad, optim): profile $st torch $tr"
    [ "$st" = "$tr" ] && ok "small: masters, gradients and optimizer state equal torch's tensors" || bad "static bytes" "$st" "$tr"
    # what torch counted goes with the recorded stream: tests/unit/test_bridge_fixture.c checks against it
    printf '#\ttorch %s\n' "$(cat "$T/rep.json")" >> "$OUTD/fixture_ref_gpu.tsv"
    # the profile's peak is the device's: the allocator's peak (cuBLAS's buffers in it) and the context
    pk=$(js "$T/p.json" "d['peak_bytes']"); tk=$(js "$T/rep.json" "d['max_allocated'] + d['context']")
    echo "  device peak: profile $pk torch $tk (max_memory_allocated + context; reserve $(js "$T/p.json" "d['reserve_bytes']"), reserved peak $(js "$T/p.json" "d['reserved_peak_bytes']"))"
    within "$pk" "$tk" 0.01 && ok "small: peak within 1% of max_memory_allocated + the context" || bad "peak" "$pk vs $tk"
    # the allocator's record (the default on a GPU) against the dispatcher's per-operator trace:
    # the same static bytes; what differs by design (autocast's copies as activations, cuBLAS's
    # workspace carried instead of reserved) is printed (docs/bridge.md, "Tensor tracking")
    MEMSPLIT_RECORD=dispatch "$M" profile --no-record-pass --json -- "$PY" "$B/ref_model.py" --blocks 4 --dim 512 --heads 8 --seq 256 \
        --batch 8 --vocab 4096 --steps 4 --amp > "$T/pd.json" 2> "$T/pd.err"
    s1=$(js "$T/p.json" "[(r['master'], r['grad'], r['optim']) for r in d['layers']]")
    s2=$(js "$T/pd.json" "[(r['master'], r['grad'], r['optim']) for r in d['layers']]")
    "$PY" "$B/same_profile.py" "$T/pd.json" "$T/p.json" | sed 's/^/  dispatch against record: /' | tail -8
    [ "$s1" = "$s2" ] && ok "small: the allocator's record has the per-operator trace's masters, gradients and optimizer state, row by row" || \
        bad "record against dispatch: static bytes" "$s2" "$s1" "$(tail -3 "$T/pd.err")"
    # the same without the tensor trace: the rows' act agree
    "$M" profile --json --diagnose-only -- "$PY" "$B/ref_model.py" --blocks 4 --dim 512 --heads 8 --seq 256 --batch 8 \
        --vocab 4096 --steps 4 --amp > "$T/d.json" 2> "$T/d.err"
    # without the tensor trace autocast's weight copies cannot be told from
    # activations: compare activations and copies together
    a1=$(js "$T/p.json" "sum(r['act'] + r['param'] for r in d['layers'])"); a2=$(js "$T/d.json" "sum(r['act'] + r['param'] for r in d['layers'])")
    echo "  act + 16-bit copies: trace $a1, diagnose-only $a2"
    within "$a1" "$a2" 0.10 && ok "diagnose-only: activations (with the copies) within 10% of the traced run's" || bad "diag act" "$a1 vs $a2" "$(tail -3 "$T/d.err")"
    # --no-cupti: CUPTI stays out of the program (no segment events), the rows stay (within 1%)
    "$M" profile --json --diagnose-only --no-cupti --record-events "$T/nc.tsv" -- "$PY" "$B/ref_model.py" --blocks 4 --dim 512 \
        --heads 8 --seq 256 --batch 8 --vocab 4096 --steps 4 --amp > "$T/nc.json" 2> "$T/nc.err"
    s0=$(grep -c '"ev":"seg"' "$OUTD/fixture_ref_gpu.tsv"); s1=$(grep -c '"ev":"seg"' "$T/nc.tsv")
    a3=$(js "$T/nc.json" "sum(r['act'] + r['param'] for r in d['layers'])")
    [ "$s0" -gt 0 ] && [ "$s1" = 0 ] && within "$a3" "$a2" 0.01 && ok "--no-cupti: no segment events ($s0 with CUPTI), the rows within 1%" || \
        bad "--no-cupti" "segment events $s1 (with CUPTI $s0), act + copies $a3 vs $a2" "$(tail -3 "$T/nc.err")"
fi

ref_case() {  # PRECISION
    local prec=$1
    local args=(--precision "$prec" --steps 3 --report "$T/ref_$prec.json")
    "$M" profile --no-record-pass --json --gpu-mem 40GiB --db "$OUTD/bridge_gpu.db" -- "$PY" "$HERE/bridge/ref_lightning.py" "${args[@]}" \
        > "$T/r.json" 2> "$T/r.err"
    local rc=$?
    grep -E "OUT OF MEMORY|what would fit|micro-batch|checkpointing|bf16|split" "$T/r.err" "$T/r.json" | head -8 | sed 's/^/  /'
    [ $rc = 3 ] && ok "ref $prec under 40 GiB: out of memory (exit 3)" || bad "ref $prec: exit $rc" "$(tail -8 "$T/r.err")"
    local where; where=$(js "$T/r.json" "d['oom']['layer_name'], d['oom']['phase'], d['oom']['what']")
    echo "  memsplit: $where"
    "$M" profile --json --ballast-only --gpu-mem 40GiB -- "$PY" "$HERE/bridge/ref_lightning.py" --precision "$prec" \
        --steps 3 > "$T/b.json" 2> "$T/b.err"
    local alone; alone=$(js "$T/b.json" "d['module'], d['type']")
    echo "  ballast alone: $alone"
    local m1 m2; m1=$(js "$T/r.json" "'' if 'own code' in d['oom']['what'] else d['oom']['what'].split(' ')[0]"); m2=$(js "$T/b.json" "d['module']")
    [ -n "$m2" ] && [ "$m1" = "$m2" ] && ok "ref $prec: the module named is where the program dies alone ($m2)" || \
        bad "ref $prec: memsplit says $m1, the program alone died in $m2" "$(tail -4 "$T/b.err")"
    local pk tk; pk=$(js "$T/r.json" "max(0, d['peak_bytes'] - d['reserve_bytes'])")
    echo "  rows: $(js "$T/r.json" "[(r['name'], r['source'], round((r['param']+r['master'])/2**20), round(r['act']/2**20)) for r in d['layers'][:3] + d['layers'][-2:]]")"
    echo "  per block act MiB $(js "$T/r.json" "round(d['layers'][1]['act']/2**20, 1)"); torch report: $(cat "$T/ref_$prec.json" 2>/dev/null | head -c 300)"
}

if want ref; then
    ref_case 16-mixed
    ref_case bf16-mixed
fi

if want hf; then
    "$M" profile --no-record-pass --json -- "$PY" "$HERE/bridge/hf_gpt2_lightning.py" --steps 3 --report "$T/hf.json" > "$T/h.json" 2> "$T/h.err"
    rc=$?
    [ $rc = 0 ] && ok "HF GPT2 in Lightning fits uncapped (exit 0)" || bad "hf: exit $rc" "$(tail -6 "$T/h.err")"
    echo "  $(js "$T/h.json" "d['program']['layer_list'], [r['name'] for r in d['layers']][:3], d['layers'][-1]['name']")"
    pk=$(js "$T/h.json" "d['peak_bytes']"); tk=$(js "$T/hf.json" "d['max_allocated'] + d['context']")
    echo "  device peak: profile $pk, torch (uncapped, program's own view: max_memory_allocated + context) $tk"
    within "$pk" "$tk" 0.01 && ok "hf: peak within 1% of max_memory_allocated + the context" || bad "hf peak" "$pk vs $tk"
    "$M" profile --no-record-pass --json --gpu-mem 12GiB -- "$PY" "$HERE/bridge/hf_gpt2_lightning.py" --steps 3 > "$T/h2.json" 2> "$T/h2.err"
    rc=$?
    echo "  under 12 GiB: $(js "$T/h2.json" "d['oom']")" | head -c 400; echo
    [ $rc = 3 ] && ok "hf under 12 GiB: out of memory, named" || bad "hf capped: exit $rc" "$(tail -6 "$T/h2.err")"
    "$M" profile --json --ballast-only --gpu-mem 12GiB -- "$PY" "$HERE/bridge/hf_gpt2_lightning.py" --steps 3 \
        > "$T/hb.json" 2> "$T/hb.err"
    m1=$(js "$T/h2.json" "'' if 'own code' in d['oom']['what'] else d['oom']['what'].split(' ')[0]"); m2=$(js "$T/hb.json" "d['module']")
    [ -n "$m2" ] && [ "$m1" = "$m2" ] && ok "hf: the module named is where it dies alone ($m2)" || bad "hf: memsplit $m1, alone $m2"
fi

if want misc; then
    printf 'import torch\nm = torch.nn.Linear(4, 4).cuda()\nm = torch.compile(m)\nprint(m(torch.randn(2, 4, device="cuda")))\n' > "$T/comp.py"
    "$M" profile -- "$PY" "$T/comp.py" > "$T/c.out" 2> "$T/c.err"; rc=$?
    grep -q "torch.compile" "$T/c.err" && [ $rc != 0 ] && ok "torch.compile refused with its message (exit $rc)" || \
        bad "torch.compile: exit $rc" "$(tail -3 "$T/c.err")"
    PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True "$M" profile --no-record-pass --json -- "$PY" "$B/ref_model.py" --blocks 4 --dim 512 \
        --heads 8 --seq 256 --batch 8 --vocab 4096 --steps 3 --amp > "$T/e.json" 2> "$T/e.err"; rc=$?
    [ $rc = 0 ] && ok "expandable_segments: profiled" || bad "expandable: exit $rc" "$(tail -4 "$T/e.err")"
    if command -v compute-sanitizer >/dev/null; then
        timeout 240 compute-sanitizer --tool memcheck --target-processes all "$M" profile --diagnose-only -- "$PY" \
            "$B/ref_model.py" --blocks 2 --dim 128 --heads 4 --seq 64 --batch 2 --vocab 512 --steps 2 \
            > "$T/s.out" 2> "$T/s.err"; rc=$?
        tail -n 3 "$T/s.out" "$T/s.err" | sed 's/^/  /'
        grep -q "ERROR SUMMARY: 0 errors" "$T/s.out" "$T/s.err" && ok "compute-sanitizer memcheck: 0 errors" || \
            bad "compute-sanitizer (exit $rc)"
    fi
fi

doctor_case() {  # NAME GPUS SCRIPT ARGS...: the whole loop, every stage on cuda:0 as its own 40 GiB device
    local name=$1 n=${DOCTOR_GPUS:-$2}; shift 2
    "$PY" "$@" --report "$T/plain_$name.json" > "$T/plain_$name.out" 2>&1
    local devs; devs=$(printf 'cuda:0%.0s,' $(seq "$n")); devs=${devs%,}
    "$M" doctor --gpus "$n" --gpu-mem 40GiB --devices "$devs" --db "$OUTD/bridge_gpu.db" --json -- \
        "$PY" "$@" > "$T/doc_$name.json" 2> "$T/doc_$name.err"
    local rc=$?
    grep -E "^placement|OUT OF MEMORY in|doctor: plan|re-planned" "$T/doc_$name.err" | head -5 | sed 's/^/  /'
    js "$T/doc_$name.json" "'  trial OOM: %s %s; stages %s' % (d['trial']['oom']['layer_name'] or d['trial']['oom']['what'], d['trial']['oom']['phase'], [(s['layers'], s['predicted_peak_bytes']) for s in d['plan']['stages']])"
    js "$T/doc_$name.json" "'  devices: ' + '; '.join('%s predicted %.2f GiB measured %.2f GiB gap %+.2f%%' % (x['name'], x['predicted_peak_bytes']/2**30, (x['measured_peak_bytes'] or 0)/2**30, 100*(x['gap'] or 0)) for x in d['train']['devices'])"
    [ $rc = 0 ] && ok "doctor $name: trial, plan, rerun (exit 0)" || bad "doctor $name: exit $rc" "$(tail -6 "$T/doc_$name.err")"
    local gaps; gaps=$(js "$T/doc_$name.json" "all(abs(x['gap']) <= 0.02 for x in d['train']['devices'])")
    [ "$gaps" = True ] && ok "doctor $name: every measured peak within 2% of the plan" || bad "doctor $name: peaks" "$gaps"
    local a b; a=$(js "$T/doc_$name.json" "'[' + ', '.join('%.4f' % x for x in d['train']['losses']) + ']'")
    b=$(grep -o '^step [0-9]* loss [0-9.]*' "$T/plain_$name.out" | awk '{printf "%s%.4f", (NR>1?", ":"["), $4} END {print "]"}')
    echo "  losses split $a, one device uncapped $b"
    [ "$a" = "$b" ] && ok "doctor $name: losses equal the uncapped single-device run's" || bad "doctor $name: losses differ"
}

if want doctor; then
    # the reference model at batch 8 runs out on one 40 GiB GPU and fits two;
    # at batch 15 (the built-in preset's micro-batch) PyTorch's own
    # activations need three (the plan says so, and what would fit two)
    cases=${DOCTOR_CASES:-ref16 refbf16 ref16b15 hf}
    R=("$HERE/bridge/ref_lightning.py" --steps 4)
    case " $cases " in *" ref16 "*) doctor_case ref16 2 "${R[@]}" --precision 16-mixed --batch 8;; esac
    case " $cases " in *" refbf16 "*) doctor_case refbf16 2 "${R[@]}" --precision bf16-mixed --batch 8;; esac
    case " $cases " in *" ref16b15 "*) doctor_case ref16b15 3 "${R[@]}" --precision 16-mixed --batch 15;; esac
    case " $cases " in *" hf "*) doctor_case hf 2 "$HERE/bridge/hf_gpt2_lightning.py" --steps 4 --batch 32;; esac
fi

if want resume; then
    # Lightning's ckpt_path="last": the rerun runs out at step 4 (the program
    # keeps more from there, which the trial's 2 steps never showed); doctor
    # learns the excess on the root stage, restarts, and Lightning resumes
    # from the last.ckpt the rerun saved after step 3 (the trial saved none)
    RL=("$PY" "$HERE/bridge/ref_lightning.py" --blocks 8 --dim 1024 --heads 8 --seq 1024 --batch 8 --vocab 32000 --steps 6)
    "$M" profile --quiet --json -- "${RL[@]}" > "$T/rl.json" 2> "$T/rl.err" || bad "resume: uncapped profile" "$(tail -3 "$T/rl.err")"
    capr=$(js "$T/rl.json" "int(d['peak_bytes'] * 0.85)")
    # more than the root stage has to spare under the plan, by 4% of a
    # device: the plan made from the uncapped profile says how much
    "$M" plan --profile "$T/rl.json" --gpus 2 --gpu-mem "$capr" -o "$T/rp.json" > /dev/null 2>&1
    grow=$(js "$T/rp.json" "($capr * 1.04 - d['stages'][0]['predicted_peak_bytes']) / 2**20")
    "$M" doctor --gpus 2 --gpu-mem "$capr" --devices cuda:0,cuda:0 --db "$OUTD/resume.db" --json -- "${RL[@]}" \
        --ckpt-dir "$T/ck" --grow-at 4 --grow-mb "$grow" > "$T/rd.json" 2> "$T/rd.err"; rc=$?
    grep -E "^doctor: (OUT|oom|plan)|^checkpoints|^warnings" "$T/rd.err" | sed 's/^/  /'
    [ $rc = 0 ] && ok "resume: doctor after the rerun ran out (exit 0)" || bad "resume: exit $rc" "$(tail -5 "$T/rd.err")"
    grep -q "does not write the program's checkpoints: Lightning's save" "$T/rd.err" && \
        ok "resume: the trial wrote none of Lightning's checkpoints" || bad "resume: trial checkpoints"
    grep -q "saved after step 3: it resumed there, no finished step lost" "$T/rd.err" && \
        ok "resume: Lightning resumed from the last.ckpt saved after step 3" || bad "resume: no resume at step 3"
    rows=$("$PY" -c "import sqlite3; c = sqlite3.connect('$OUTD/resume.db'); print(','.join(str(r[0]) for r in
        c.execute(\"SELECT step FROM steps JOIN runs ON runs.id = steps.run_id WHERE runs.kind = 'train' ORDER BY step\")))" 2>&1)
    [ "$rows" = "1,2,3,4,5,6" ] && ok "resume: one row per step 1-6" || bad "resume: rows $rows"
    js "$T/rd.json" "'  devices after the restart: ' + '; '.join('predicted %.2f GiB measured %.2f GiB gap %+.2f%%' % (x['predicted_peak_bytes']/2**30, (x['measured_peak_bytes'] or 0)/2**30, 100*(x['gap'] or 0)) for x in d['train']['devices'])"
    # HF's checkpoint-N folders (save_pretrained: the weights through
    # safetensors, outside torch.save and Python's open), transformers
    # imported before torch: the trial keeps a run before's weights and
    # optimizer states byte for byte, puts back the JSON it wrote beside
    # them (config.json, generation_config.json), and into an empty folder
    # leaves none
    HC=("$PY" "$HERE/bridge/hf_checkpoints.py")
    wsnap() { (cd "$1" && for f in */*; do echo "$f $(stat -c '%Y %s' "$f") $(cksum < "$f")"; done); }
    mkdir -p "$T/hfck" "$T/hfck2"
    "${HC[@]}" "$T/hfck" 3 > "$T/hfck.out" 2>&1 || bad "resume: hf checkpoints alone" "$(tail -3 "$T/hfck.out")"
    wsnap "$T/hfck" > "$T/hfck.before"
    "$M" profile --steps 3 --quiet --json -- "${HC[@]}" "$T/hfck" 3 > /dev/null 2> "$T/hfck.err" && \
        ok "resume: profile of a program that imports transformers before torch" || \
        bad "resume: hf checkpoints profile" "$(tail -3 "$T/hfck.err")"
    [ "$(grep -c "/model.safetensors \|/optimizer.pt \|/config.json " "$T/hfck.before")" = 9 ] && \
        cmp -s "$T/hfck.before" <(wsnap "$T/hfck") && \
        grep -q "safetensors' save to $T/hfck/checkpoint-1/model.safetensors went to a file of memsplit's own" "$T/hfck.err" && \
        ok "resume: the trial kept the run before's weights, optimizer states and JSON in its checkpoint-N" || \
        bad "resume: hf checkpoints changed" "$(diff "$T/hfck.before" <(wsnap "$T/hfck") | head -3)" "$(grep -i warn "$T/hfck.err")"
    "$M" profile --steps 3 --quiet --json -- "${HC[@]}" "$T/hfck2" 3 > /dev/null 2> "$T/hfck2.err" && \
        [ -z "$(ls -A "$T/hfck2")" ] && ok "resume: into an empty folder the trial left none of its checkpoint-N" || \
        bad "resume: hf checkpoints into an empty folder left: $(ls -A "$T/hfck2" | paste -sd' ')" "$(tail -2 "$T/hfck2.err")"
fi

crossing_set() {  # FILE: a crossing log's forward crossings in order, then its backward ones as a set
    # without the layer: over two devices torch's engine ran each device's nodes on a thread of its own,
    # so their order and the layer the session marks at each varied (the pinn case, H100, 2026-12-06);
    # the rerun now runs them on one thread (docs/bridge.md, "The autograd engine's threads"), and
    # the set stays the comparison until a GPU has shown the order alike
    awk -F'\t' -v OFS='\t' '$2 != 2 {print $1, $2, $3, $4, $5, $7}' "$1"
    awk -F'\t' -v OFS='\t' '$2 == 2 {print $1, $2, "-", $4, $5, $7}' "$1" | sort
}

realdev_case() {  # NAME LOSS_PATTERN -- PROGRAM...: doctor over $RD (cuda:0,cpu) against the unsplit run
    local name=$1 pat=$2; shift 3
    "$@" > "$T/rp_$name.out" 2>&1 || { bad "realdev $name: the program alone failed" "$(tail -3 "$T/rp_$name.out")"; return; }
    "$M" profile --quiet --json -- "$@" > "$T/ru_$name.json" 2> "$T/ru_$name.err" || \
        { bad "realdev $name: uncapped profile" "$(tail -3 "$T/ru_$name.err")"; return; }
    # the tensors' peak at 75% (FRAC; the CUDA context is the reserve, on top): one device is too
    # small, two fit
    local cap; cap=$(js "$T/ru_$name.json" "int(d['reserve_bytes'] + ${FRAC:-0.75} * (d['peak_bytes'] - d['reserve_bytes']))")
    "$M" plan --profile "$T/ru_$name.json" --gpus 2 --devices "$RD" --gpu-mem "$cap" -o "$T/pr_$name.json" \
        > /dev/null 2> "$T/pr_$name.err" || bad "realdev $name: plan from the uncapped profile" "$(tail -3 "$T/pr_$name.err")"
    "$M" doctor --gpus 2 --devices "$RD" --gpu-mem "$cap" --db "$T/rd_$name.db" --json -- "$@" \
        > "$T/rd_$name.json" 2> "$T/rd_$name.err"; local rc=$?
    grep -E "^placement|OUT OF MEMORY in" "$T/rd_$name.err" | head -3 | sed 's/^/  /'
    # what the prediction came from, for a gap to be read back here: the uncapped profile, doctor's database
    cp "$T/rd_$name.err" "$OUTD/realdev_$name.err" 2>/dev/null
    cp "$T/ru_$name.json" "$T/rd_$name.json" "$T/pr_$name.json" "$T/rd_$name.db" "$OUTD/" 2>/dev/null
    [ $rc = 0 ] && ok "realdev $name: doctor over $RD (exit 0)" || bad "realdev $name: exit $rc" "$(tail -6 "$T/rd_$name.err")"
    js "$T/rd_$name.json" "'  devices: ' + '; '.join('%s predicted %.1f MiB measured %s' % (x['name'], x['predicted_peak_bytes']/2**20, 'not measured' if x['measured_peak_bytes'] is None else '%.1f MiB gap %+.2f%%' % (x['measured_peak_bytes']/2**20, 100*x['gap'])) for x in d['train']['devices'])"
    grep -E "^  cuda:[0-9]+: the allocator's peak" "$T/rd_$name.err" | sed 's/^/  /'
    # each GPU of $RD alone on its device: its peak in two parts, each held to its own prediction. The
    # allocator's peak: at least the tensors predicted (less 2%), at most those and the library
    # buffers the allocator holds (cuBLAS's workspaces; plus 2%); beyond the allocator (the
    # context, the libraries' own memory) at most what the plan gave it. A stage whose layers
    # load fewer libraries than the whole program holds less in both (realdev packed: no
    # cuBLAS on cuda:0, so none of its 65 MiB of workspaces, an H100 of 2026-12-07), and both
    # are the whole program's in the prediction, on the safe side (docs/bridge.md, "Workspaces
    # and libraries a split stage does not have")
    # (a CPU stage says not measured)
    local g; g=$(js "$T/rd_$name.json" "all((lambda x: 0.98 * (x['predicted_peak_bytes'] - x['predicted_by_category']['reserve']) <= x['measured_allocator_peak_bytes'] <= 1.02 * x['predicted_allocator_peak_bytes'] and x['measured_beyond_allocator_bytes'] <= x['predicted_beyond_allocator_bytes'])(x) if x['name'].startswith('cuda') else x['measured_peak_bytes'] is None for x in d['train']['devices'])")
    [ "$g" = True ] && ok "realdev $name: each GPU's allocator peak between its tensors and its tensors with the library buffers (2%), beyond it no more than the plan gave; a CPU stage says not measured" || \
        bad "realdev $name: peaks" "$g"
    local a b; a=$(js "$T/rd_$name.json" "' '.join('%.6f' % x for x in d['train']['losses'])")
    b=$(grep -oE "$pat" "$T/rp_$name.out" | awk '{print $4}' | paste -sd' ' -)
    echo "  losses split $a; unsplit $b"
    local same; same=$("$PY" -c "a=[float(x) for x in '$a'.split()]; b=[float(x) for x in '$b'.split()]
print(len(a) == len(b) > 0 and max(abs(x - y) for x, y in zip(a, b)) <= 2e-4, end='')")
    [ "$same" = True ] && ok "realdev $name: losses equal the unsplit run's (within the 4 printed decimals)" || \
        bad "realdev $name: losses differ" "$a" "$b"
    [ -n "${REALDEV_QUICK:-}" ] && return
    # the same plan with both stages on cuda:0 (virtual): the same crossings, by clone
    "$PY" -c "import json; d=json.load(open('$T/pr_$name.json')); d['devices'][1]['device']='cuda:0'; json.dump(d, open('$T/pv_$name.json','w'))"
    local how
    for how in r v; do
        rm -f "$T/x${how}_$name.tsv"
        MEMSPLIT_BRIDGE_TEST_CROSSINGS="$T/x${how}_$name.tsv" "$M" train --plan "$T/p${how}_$name.json" --json -- "$@" \
            > "$T/t${how}_$name.json" 2> "$T/t${how}_$name.err" || bad "realdev $name: train --plan ($how)" "$(tail -3 "$T/t${how}_$name.err")"
    done
    js "$T/tv_$name.json" "'  the same plan on cuda:0,cuda:0 (virtual): ' + '; '.join('%s predicted %.1f MiB measured %.1f MiB gap %+.2f%%' % (x['name'], x['predicted_peak_bytes']/2**20, (x['measured_peak_bytes'] or 0)/2**20, 100*(x['gap'] or 0)) for x in d['devices'])"
    js "$T/tr_$name.json" "'  train --plan on $RD: ' + '; '.join('%s predicted %.1f MiB measured %s' % (x['name'], x['predicted_peak_bytes']/2**20, 'not measured' if x['measured_peak_bytes'] is None else '%.1f MiB gap %+.2f%%' % (x['measured_peak_bytes']/2**20, 100*x['gap'])) for x in d['devices'])"
    if [ -s "$T/xr_$name.tsv" ] && cmp -s <(crossing_set "$T/xr_$name.tsv") <(crossing_set "$T/xv_$name.tsv") &&
       [ "$(cut -f6 "$T/xr_$name.tsv" | sort -u)" = to ] && [ "$(cut -f6 "$T/xv_$name.tsv" | sort -u)" = clone ]; then
        ok "realdev $name: $(wc -l < "$T/xr_$name.tsv") crossings, .to on $RD exactly where cuda:0,cuda:0 clones"
    else bad "realdev $name: crossings differ" "$(diff <(crossing_set "$T/xr_$name.tsv") <(crossing_set "$T/xv_$name.tsv") | head -4)"; fi
}

if want realdev; then
    MB=("$PY" "$HERE/../bridge/models.py")
    # the two devices of every case: a GPU and the CPU, or REALDEV_DEVICES=cuda:0,cuda:1 on a machine of two
    RD=${REALDEV_DEVICES:-cuda:0,cpu}
    # sizes where the tensors (several GiB) and not the CUDA context decide what fits
    # REALDEV_CASES picks the programs (default all four; "none": only the leak check)
    rcase() { case " ${REALDEV_CASES:-loop lightning32 pinn packed} " in *" $1 "*) return 0;; esac; return 1; }
    rcase loop && realdev_case loop 'step [0-9]+ loss [0-9.]+' -- "${MB[@]}" --model ref --blocks 6 --dim 1024 \
        --seq 256 --batch 16 --vocab 16384 --steps 5
    L32=(--blocks 6 --dim 1024 --heads 8 --seq 512 --batch 8 --vocab 16384 --steps 4)
    rcase lightning32 && realdev_case lightning32 'step [0-9]+ loss [0-9.]+' -- "$PY" "$HERE/bridge/ref_lightning.py" \
        --precision 32-true "${L32[@]}"
    # create_graph across real devices: each gradient's copy back is a node whose own gradient is
    # copied back again (_apply.Cross), as on the virtual devices it is compared with (sizes that
    # keep the CPU stage's steps a few seconds on 16 cores, with tensors of about 0.8 GiB: at batch 32
    # the CUDA context's 5% headroom left no split of two, an H100 of 2026-12-06)
    rcase pinn && realdev_case pinn 'step [0-9]+ loss [0-9.]+' -- "$PY" "$HERE/../bridge/shapes.py" --shape pinn \
        --dim 128 --batch 192 --steps 4 --device cuda
    # a PackedSequence crossing between two LSTMs: its batch_sizes stay on the CPU (torch's
    # PackedSequence.to), where an LSTM on a GPU wants them (batch 16's 129 MiB of tensors left no
    # split of two under the context's headroom; 96: about 0.75 GiB)
    # At 75% the record pass's stage of the second LSTM alone, with cuDNN's workspace (95.65 MiB,
    # counted since the dispatch tracker sees workspaces), left no split of two: 92%
    rcase packed && FRAC=0.92 realdev_case packed 'step [0-9]+ loss [0-9.]+' -- "$PY" "$HERE/../bridge/shapes.py" --shape packed \
        --dim 256 --batch 96 --steps 4 --device cuda
    [ -n "${REALDEV_QUICK:-}" ] && SECTIONS=${SECTIONS/realdev/}
fi
if want shapes; then
    # programs the CPU suite has on the GPU with torch 2.x (tests/bridge/shapes.py --device cuda):
    # TorchScript blocks (scripted and traced), spectral_norm (parametrizations), WGAN-GP's
    # torch.autograd.grad with create_graph (a GAN's penalty, a PINN's residual), the ModuleDict
    # of blocks, trained by micro-batches (accum: the allocator's record of the optimizer's
    # temporaries), deep-copied (snapshot), saved whole and loaded back (saved). Each alone, then
    # profiled under a cap of 70% of its tensors' peak (95% for the GANs; the CUDA context on
    # top) and split by doctor over two virtual devices on cuda:0: the alone run's losses,
    # each stage within 2% of its prediction
    for s in ${GPU_SHAPES:-jit sngan gp dict pinn accum snapshot saved}; do
        # sizes whose tensors outweigh the CUDA context and the libraries' buffers (each
        # device's reserve, and the 5% headroom of the device); the GANs' activations leave
        # no split of two at 70%, nor at 85% on an H100 (gp: 1.42 GiB a device needed, 1.40 there): 95%
        case $s in *gan|gp) size=(--dim 64 --batch 65536); frac=0.95;; *) size=(--dim 1024 --batch 64); frac=0.7;; esac
        SP=("$PY" "$HERE/../bridge/shapes.py" --shape "$s" --steps 4 "${size[@]}" --device cuda)
        "${SP[@]}" > "$T/sh_$s.out" 2>&1 || { bad "shapes $s: the program alone failed" "$(tail -3 "$T/sh_$s.out")"; continue; }
        "$M" profile --quiet --json -- "${SP[@]}" > "$T/sh_$s.json" 2> "$T/sh_$s.err" || \
            { bad "shapes $s: uncapped profile" "$(tail -3 "$T/sh_$s.err")"; continue; }
        echo "  $s: units $(js "$T/sh_$s.json" "[r['name'] for r in d['layers']]")"
        cap=$(js "$T/sh_$s.json" "int(d['reserve_bytes'] + $frac * (d['peak_bytes'] - d['reserve_bytes']))")
        "$M" profile --json --gpu-mem "$cap" -- "${SP[@]}" > "$T/sh_$s.oom" 2> "$T/sh_$s.oomerr"; rc=$?
        [ $rc = 3 ] && ok "shapes $s: diagnosed under $frac of its peak: $(js "$T/sh_$s.oom" "'%s %s step %s' % (d['oom']['layer_name'] or d['oom']['what'], d['oom']['phase'], d['oom']['step'])")" || \
            bad "shapes $s: diagnosis (exit $rc)" "$(tail -3 "$T/sh_$s.oomerr")"
        dargs=(); [ "$s" = saved ] && dargs=(--steps 3)     # its first load precedes placement (tests/bridge/shapes.sh)
        "$M" doctor "${dargs[@]}" --gpus 2 --gpu-mem "$cap" --devices cuda:0,cuda:0 --db "$T/sh_$s.db" --json -- "${SP[@]}" \
            > "$T/sh_$s.doc" 2> "$T/sh_$s.docerr"; rc=$?
        grep -E "^placement" "$T/sh_$s.docerr" | head -2 | sed 's/^/  /'
        [ $rc = 0 ] || { bad "shapes $s: doctor (exit $rc)" "$(tail -4 "$T/sh_$s.docerr")"; continue; }
        a=$(js "$T/sh_$s.doc" "','.join('%.4f' % x for x in d['train']['losses'])")
        b=$(grep -o '^step [0-9]* loss [-0-9.]*' "$T/sh_$s.out" | awk '{print $4}' | paste -sd, -)
        [ -n "$b" ] && [ "$a" = "$b" ] && ok "shapes $s: split over two devices of cuda:0, the alone run's losses ($a)" || \
            bad "shapes $s: losses" "split $a" "alone $b"
        gaps=$(js "$T/sh_$s.doc" "', '.join('%.1f MiB predicted, %+.2f%%' % (x['predicted_peak_bytes'] / 2**20, 100 * x['gap']) for x in d['train']['devices'])")
        [ "$(js "$T/sh_$s.doc" "all(abs(x['gap']) <= 0.02 for x in d['train']['devices'])")" = True ] && \
            ok "shapes $s: every stage within 2% of its prediction ($gaps)" || bad "shapes $s: stages" "$gaps"
        if [ "$s" = saved ]; then     # torch 2's pickle and TypedStorage: the loaded copy placed, its own weights
            grep -q "^saved: the loaded model computes as the one saved yes (0), with its own weights yes" "$T/sh_$s.docerr" && \
                ok "shapes saved: the split model pickles, and torch.load's copy computes as it" || \
                bad "shapes saved: the loaded copy" "$(grep -E "^saved|Error" "$T/sh_$s.docerr" | tail -2)"
        fi
    done
fi

if want realdev; then
    # a module that keeps another stage's tensor: torch's own device check, named by memsplit
    LK=(--model leak --blocks 4 --dim 1024 --seq 256 --batch 16 --vocab 16384 --steps 3)
    "$M" profile --no-record-pass --quiet --json --db "$T/leak.db" -- "${MB[@]}" "${LK[@]}" > "$T/lk.json" 2> "$T/lk.err"
    "$M" plan --db "$T/leak.db" --gpus 2 --devices "$RD" \
        --gpu-mem "$(js "$T/lk.json" "int(d['reserve_bytes'] + 0.75 * (d['peak_bytes'] - d['reserve_bytes']))")" \
        -o "$T/lk_plan.json" > /dev/null 2> "$T/lk_plan.err"
    # the split put where the kept tensor crosses it: block 0 (layer 1) on cuda:0, the last block on
    # the CPU (the planner's own split follows the rows, and may keep the two blocks together)
    "$PY" -c "import json; d=json.load(open('$T/lk_plan.json')); s=d['stages']; last=s[-1]['layers'][1]
s[0]['layers'], s[-1]['layers'] = [0, 1], [2, last]; d['stages'] = [s[0], s[-1]]; json.dump(d, open('$T/lk_split.json', 'w'))" \
        2>> "$T/lk_plan.err"
    "$M" train --plan "$T/lk_split.json" -- "${MB[@]}" "${LK[@]}" > "$T/lk.out" 2> "$T/lk.err"; rc=$?
    [ $rc = 2 ] && grep -q "without the boundary copy" "$T/lk.err" && \
        ok "realdev: a module moving tensors across real devices is refused by name (exit 2)" || \
        bad "realdev leak: exit $rc" "$(grep -E "memsplit|Error" "$T/lk.err" | tail -3)" "$(tail -2 "$T/lk_plan.err")"
    # 16-mixed: autocast("cuda") does not reach a CPU stage: refused with the way out (the plan: lightning32's)
    if rcase lightning32 && [[ $RD == *cpu* ]]; then
        "$M" train --plan "$T/pr_lightning32.json" -- "$PY" "$HERE/bridge/ref_lightning.py" --precision 16-mixed \
            "${L32[@]}" > "$T/m16.out" 2> "$T/m16.err"; rc=$?
        grep -E "autocast" "$T/m16.err" | head -2 | sed 's/^/  /'
        [ $rc != 0 ] && grep -q "32-true" "$T/m16.err" && ok "realdev: 16-mixed with a CPU stage refused with the fix (exit $rc)" || \
            bad "realdev 16-mixed: exit $rc" "$(tail -4 "$T/m16.err")"
    fi
fi

if want overhead; then
    # the program's own step times, steps 4..20 (warm), plain and under
    # memsplit, the three alternated twice so that drift hits them alike
    args=(--blocks 8 --dim 2048 --heads 16 --seq 2048 --batch 8 --vocab 32000 --steps 21 --amp)
    for r in $(seq "${OVERHEAD_ROUNDS:-2}"); do
        "$PY" "$B/ref_model.py" "${args[@]}" > "$T/o0.$r" 2>&1
        "$M" profile --steps 21 --diagnose-only -- "$PY" "$B/ref_model.py" "${args[@]}" > "$T/o1.$r" 2>&1
        "$M" profile --no-record-pass --steps 21 -- "$PY" "$B/ref_model.py" "${args[@]}" > "$T/o2.$r" 2>&1
    done
    med() { cat "$@" | grep -o '^step [0-9]* loss [0-9.]* ms [0-9.]*' | awk '$2 >= 3 {print $6}' | sort -n |
            awk '{v[NR]=$1} END {if (NR) printf "%.2f", (NR%2 ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2); else print "nan"}'; }
    m0=$(med "$T"/o0.*); m1=$(med "$T"/o1.*); m2=$(med "$T"/o2.*)
    echo "  step ms (median of steps 4..20, two runs each): plain $m0, diagnose-only $m1, tensor trace $m2"
    "$PY" -c "a,b,c=$m0,$m1,$m2; print('  overhead: diagnose-only %+.1f%%, trace %+.1f%%' % (100*(b/a-1), 100*(c/a-1)))"
fi
if want programs; then
    # programs as users write them, each too big for one emulated device of
    # CAP and split by doctor over GPUS virtual ones on cuda:0 (issue 37):
    # alone uncapped, profiled under CAP (the OOM named, against where the
    # program dies under the ballast alone), doctor (the split's
    # losses against the alone run's, each device's measured peak against
    # the plan). Every run's output, JSON and database come back in $OUT.
    # PROGRAMS picks ("resnet152 t5 llama"; also gan, a Lightning GAN with
    # manual optimization); CAP_RESNET152, CAP_T5, CAP_LLAMA, CAP_GAN
    # (20GiB, 47GiB, 22GiB, 3584MiB), GPUS_<NAME> (2) and ARGS_<NAME> (appended to the
    # program's arguments) override; PROGRAMS_STEPS (4) the program's steps;
    # PROGRAMS_DEVICES (GPUS times cuda:0: virtual devices) the devices doctor
    # splits over (cuda:0,cuda:1 on a machine of two GPUs: real devices, and
    # GPUS is their count). The rerun's step time (the program's own lines,
    # the median from its second step) is shown against the alone run's.
    # A default CAP that the alone run shows does not make the program die
    # (its peak below it) or that GPUS devices could not hold is replaced by
    # 1.4/GPUS of the peak, and said; a CAP given is kept as it is.
    # PROGRAMS_RUN_S (300) caps each run, PROGRAMS_BUDGET_S (540) the section.
    pstart=$SECONDS
    exec 3>&1   # prun says how a run went here, whatever the run's output is redirected to
    # prun NAME CMD...: the command under timeout, within the section's budget
    prun() {
        local name=$1 left=$(( ${PROGRAMS_BUDGET_S:-540} - (SECONDS - pstart) )); shift
        local lim=${PROGRAMS_RUN_S:-300}; [ "$left" -lt "$lim" ] && lim=$left
        if [ "$lim" -lt 20 ]; then echo "  $name: skipped, the section's ${PROGRAMS_BUDGET_S:-540} s are spent" >&3; return 124; fi
        local t0=$SECONDS rc=0
        timeout -k 10 "$lim" "$@" || rc=$?
        echo "  ($name: exit $rc, $((SECONDS - t0)) s, at $((SECONDS - pstart)) s of the section)" >&3
        [ $rc = 124 ] || [ $rc = 137 ] && echo "  $name: TIMED OUT after $lim s" >&3
        return $rc
    }
    bytes() { "$PY" -c "import re,sys; m=re.fullmatch(r'([0-9.]+)\s*([KMGT]?)(i?B)?', sys.argv[1].strip(), re.I)
print(int(float(m.group(1)) * (1024 if m.group(3) in (None, 'iB', 'IB', 'ib') else 1000) ** ' KMGT'.index((m.group(2) or ' ').upper())))" "$1"; }
    losses() { grep -oE '^step [0-9]+ loss [0-9.naif]+' "$1" | awk '{print $4}' | paste -sd' ' -; }
    steps=${PROGRAMS_STEPS:-4}
    for name in ${PROGRAMS:-resnet152 t5 llama}; do
        case $name in
        resnet152) P=("$PY" "$HERE/bridge/tv_resnet_amp.py" --model resnet152 --batch 384); dcap=20GiB; prec=fp16 ;;
        t5) P=("$PY" "$HERE/bridge/hf_t5.py" --batch 16 --seq 512); dcap=47GiB; prec=bf16 ;;
        llama) P=("$PY" "$HERE/bridge/hf_llama_lightning.py" --batch 4 --seq 2048); dcap=22GiB; prec=bf16 ;;
        gan) P=("$PY" "$HERE/bridge/gan_lightning.py"); dcap=3584MiB; prec=fp32 ;;
        *) bad "programs: no program named $name (resnet152, t5, llama, gan)"; continue ;;
        esac
        U=$(echo "$name" | tr a-z A-Z)
        cv=CAP_$U gv=GPUS_$U av=ARGS_$U
        cap=${!cv:-$dcap} g=${!gv:-2}
        [ -n "${PROGRAMS_DEVICES:-}" ] && g=$(echo "$PROGRAMS_DEVICES" | tr ',' '\n' | grep -c .)
        # shellcheck disable=SC2206  # ARGS_<NAME> is meant to split
        P+=(--steps "$steps" ${!av:-})
        echo "== programs: $name: ${P[*]:1}"
        # a. alone, uncapped: its losses, step times and torch's own peak
        prun "$name alone" "${P[@]}" --report "$T/pa_$name.json" > "$T/pa_$name.out" 2>&1
        rc=$?; cp "$T/pa_$name.out" "$OUTD/programs_$name.alone.out" 2>/dev/null
        cp "$T/pa_$name.json" "$OUTD/programs_$name.alone.json" 2>/dev/null
        if [ $rc != 0 ]; then bad "programs $name: the program alone failed (exit $rc)" "$(tail -5 "$T/pa_$name.out")"; continue; fi
        la=$(losses "$T/pa_$name.out")
        echo "  alone: losses $la; step ms $(grep -oE '^step [0-9]+ .* ms [0-9.]+' "$T/pa_$name.out" | awk '{print $6}' | paste -sd' ' -)"
        pk=$(js "$T/pa_$name.json" "d['max_allocated'] + d['context']")
        echo "  alone: peak $(js "$T/pa_$name.json" "'%.2f GiB (max_memory_allocated %.2f GiB + context %.2f GiB; reserved %.2f GiB)' % ((d['max_allocated'] + d['context'])/2**30, d['max_allocated']/2**30, d['context']/2**30, d['max_reserved']/2**30)")"
        capb=$(bytes "$cap")
        # the default CAP, where the peak says it would not make the program die alone or fit GPUS devices
        new=$("$PY" -c "pk,c,g=$pk,$capb,$g; print('' if 1.03*c < pk < 0.85*g*c else int(pk * 1.4 / g))" 2>/dev/null)
        if [ -z "${!cv:-}" ] && [ -n "$new" ]; then
            echo "  NOTE: $cap would not make $name die alone and fit $g devices (peak $pk B): CAP is $new B ($((new >> 30)) GiB) instead"
            cap=$new
        fi
        # b. profiled under CAP: out of memory, and where
        prun "$name profile" "$M" profile --no-record-pass --json --no-second-pass --gpu-mem "$cap" -- "${P[@]}" \
            > "$T/pp_$name.json" 2> "$T/pp_$name.err"; rc=$?
        cp "$T/pp_$name.json" "$OUTD/programs_$name.profile.json" 2>/dev/null
        cp "$T/pp_$name.err" "$OUTD/programs_$name.profile.err" 2>/dev/null
        echo "  under $cap: $(js "$T/pp_$name.json" "d['oom']['layer_name'], d['oom']['phase'], d['oom']['what']")"
        [ $rc = 3 ] && ok "programs $name: out of memory under $cap, named (exit 3)" || \
            bad "programs $name: profile under $cap exit $rc (3 expected)" "$(tail -4 "$T/pp_$name.err")"
        # the module it names is where the program dies under the ballast alone (no hooks, no trace)
        prun "$name ballast" "$M" profile --json --ballast-only --gpu-mem "$cap" -- "${P[@]}" \
            > "$T/pb_$name.json" 2> "$T/pb_$name.err"
        m1=$(js "$T/pp_$name.json" "'' if 'own code' in d['oom']['what'] else d['oom']['what'].split(' ')[0]"); m2=$(js "$T/pb_$name.json" "d['module']")
        [ -n "$m2" ] && [ "$m1" = "$m2" ] && ok "programs $name: the module named is where it dies alone ($m2)" || \
            bad "programs $name: memsplit names $m1, alone it dies in $m2" "$(tail -3 "$T/pb_$name.err")" \
                "under memsplit $(grep -m1 -o 'at OOM: .*' "$T/pp_$name.err")" \
                "alone          $(grep -m1 -o 'at OOM: .*' "$T/pb_$name.err")"
        # c. doctor over GPUS devices of CAP on cuda:0
        devs=$(printf 'cuda:0%.0s,' $(seq "$g")); devs=${PROGRAMS_DEVICES:-${devs%,}}
        rm -f "$OUTD/programs_$name.db"
        prun "$name doctor" "$M" doctor --gpus "$g" --devices "$devs" --gpu-mem "$cap" --json \
            --db "$OUTD/programs_$name.db" -- "${P[@]}" > "$T/pd_$name.json" 2> "$T/pd_$name.err"; rc=$?
        cp "$T/pd_$name.json" "$OUTD/programs_$name.doctor.json" 2>/dev/null
        cp "$T/pd_$name.err" "$OUTD/programs_$name.doctor.err" 2>/dev/null
        grep -E "^placement|OUT OF MEMORY in|re-planned" "$T/pd_$name.err" | head -4 | sed 's/^/  /'
        if [ $rc != 0 ]; then bad "programs $name: doctor exit $rc" "$(tail -8 "$T/pd_$name.err")"; continue; fi
        ok "programs $name: doctor trained it over $devs of $cap (exit 0)"
        js "$T/pd_$name.json" "'  devices: ' + '; '.join('%s predicted %.2f GiB measured %s' % (x['name'], x['predicted_peak_bytes']/2**30, 'not measured' if x['measured_peak_bytes'] is None else '%.2f GiB gap %+.2f%%' % (x['measured_peak_bytes']/2**30, 100*x['gap'])) for x in d['train']['devices'])"
        gaps=$(js "$T/pd_$name.json" "all(x['gap'] is not None and abs(x['gap']) <= 0.02 for x in d['train']['devices'])")
        [ "$gaps" = True ] && ok "programs $name: every measured peak within 2% of the plan" || \
            bad "programs $name: a measured peak more than 2% from the plan (or not measured)" "$gaps"
        "$PY" - "$T/pa_$name.out" "$T/pd_$name.err" "$devs" <<'EOF'
import re, statistics, sys
def last_run(path):   # the program's step lines of its last run in the file (doctor's rerun)
    runs = []
    for line in open(path, errors="replace"):
        m = re.match(r"^step (\d+) loss \S+ ms ([0-9.]+)", line)
        if m:
            if int(m.group(1)) == 0 or not runs:
                runs.append([])
            runs[-1].append(float(m.group(2)))
    return runs[-1] if runs else []
a, d = last_run(sys.argv[1]), last_run(sys.argv[2])
med = lambda xs: statistics.median(xs[1:] or xs)
if a and d:
    print("  step ms (median from the second step): alone %.2f, split over %s %.2f (%+.1f%%)"
          % (med(a), sys.argv[3], med(d), 100 * (med(d) / med(a) - 1)))
EOF
        ld=$(js "$T/pd_$name.json" "' '.join('%.4f' % x for x in d['train']['losses'])")
        echo "  losses split $ld; alone $la"
        same=$("$PY" -c "a=[float(x) for x in '$ld'.split()]; b=[float(x) for x in '$la'.split()]
print(len(a) == len(b) > 0 and all(abs(x - y) <= 2e-2 * abs(y) for x, y in zip(a, b)), end='')" 2>&1)
        [ "$same" = True ] && ok "programs $name: losses equal the alone run's within 2e-2 relative ($prec autocast)" || \
            bad "programs $name: losses differ from the alone run's (2e-2 relative, $prec)" "$ld" "$la"
    done
fi
echo "bridge-gpu: $pass passed, $fail failed"
[ $fail -eq 0 ]
