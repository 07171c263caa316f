#!/usr/bin/env bash
# The checks that need a GPU, in one run on a machine with CUDA (a lent GPU machine, a cluster
# node): the CUDA tests, the side-by-side benchmark on the GPU, and bf16 against fp32; opt-in, NPT's
# step benchmark on the GPU (Protein and the paper profile's HIGGS batch, fp32 and bf16: time per
# step and the CUDA allocator's peak) and the gpu_calibration jobs.
#
#   scripts/gpu_checks.sh OUT_DIR NPT_REPO BISHOP_REPO
#
# Runs from the repository root with the machine's own python3 and torch (src/ and the root, for
# benchmarks/, on PYTHONPATH: no install, so a machine without package registries can run it).
# Each stage has a time limit and writes its log and JSON into OUT_DIR as it goes; a stage that
# fails or runs out does not stop the next. Exit status: the number of stages that failed.
#
# Environment: PYTHON (default python3), STAGES (default "test_cuda versus precision"; `steps` and
# `jobs` are opt-in), each stage's limit in seconds (TEST_LIMIT, VERSUS_LIMIT, PRECISION_LIMIT,
# STEPS_LIMIT, JOBS_LIMIT), ROUNDS (versus, default 3), PRECISION_ARGS (extra options of
# python -m benchmarks.precision, e.g. "--datasets digits") and DATA_MIRROR (stage jobs: a directory
# laid out like ../shared/datasets).
# Stage `jobs` runs a profile job by job (scripts/run_jobs.py: the workflow's commands without
# Snakemake; JOBS_PROFILE, default gpu_calibration, whose jobs calibrate the plan's GPU-hours:
# records/gpu/*/results), each command stopped after JOB_LIMIT seconds (default 150), with
# JOBS_ARGS passed on (e.g. "--restore npt_breast_cancer --parallel 9": the record's finished jobs
# come back, nine run at once on the one GPU), and packs the jobs' metrics.json into
# OUT_DIR/jobs-results.tar.gz. A lent machine's
# image may lack some of the package's dependencies: carry wheels of those it lacks (e.g.
# jsonschema with its dependencies, liac-arff, xlrd, pytorch-tabnet, rtdl_revisiting_models,
# entmax for the tests, the pinned pandas and scikit-learn) and install them with --no-deps.
# TABREPRO_DECLARED_COMMIT (the commit of the copied tree): when set, the package's provenance
# records it and does not read the tree's .git (GIT_DIR points nowhere), which may be older than
# the copied files.
# NPT_REPO and BISHOP_REPO must lie outside this repository (the benchmark refuses its own tree):
# on a lent GPU machine, carry them in an ignored folder and copy it to /tmp first.
# Stage times (records/gpu/*/call-*/*.log): test_cuda well under a minute; versus a few minutes
# for 3 rounds (each run a fresh process that initialises CUDA); precision one to a few minutes per
# fit, digits the longest. All three do not fit one 10-minute call: split them by STAGES.
set -u
out=${1:?OUT_DIR}; npt_repo=${2:?NPT_REPO}; bishop_repo=${3:?BISHOP_REPO}
mkdir -p "$out"
export PYTHONPATH="$PWD/src:$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
python=${PYTHON:-python3}
[ -n "${TABREPRO_DECLARED_COMMIT:-}" ] && export GIT_DIR=/nonexistent/declared-commit-instead
failed=0
stage() {  # stage NAME SECONDS COMMAND...
  local name=$1 limit=$2; shift 2
  local start=$SECONDS
  echo "=== $name (limit ${limit} s)"
  timeout "$limit" "$@" >"$out/$name.log" 2>&1
  local rc=$?
  echo "=== $name: exit $rc after $((SECONDS - start)) s"
  tail -n 25 "$out/$name.log"
  [ "$rc" -eq 0 ] || failed=$((failed + 1))
}
{ nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv
  "$python" -c 'import torch, sys; print(sys.version.split()[0], torch.__version__, torch.version.cuda, torch.cuda.get_device_name(0))'
  grep -m1 "model name" /proc/cpuinfo; nproc; uptime; } >"$out/machine.txt" 2>&1
cat "$out/machine.txt"
stages=" ${STAGES:-test_cuda versus precision} "
if [[ $stages == *" test_cuda "* ]]; then
  stage test_cuda "${TEST_LIMIT:-60}" "$python" -m pytest -q -p no:cacheprovider -rA tests/live/test_cuda.py \
    tests/unit/test_saved_pass.py
fi
if [[ $stages == *" steps "* ]]; then
  stage steps "${STEPS_LIMIT:-120}" bash -c "'$python' -m benchmarks.steps.npt --device cuda --cases protein higgs --steps 5 \
    && '$python' -m benchmarks.steps.npt --device cuda --cases protein higgs --steps 5 --bf16"
fi
if [[ $stages == *" versus "* ]]; then
  stage versus "${VERSUS_LIMIT:-300}" "$python" -m benchmarks.versus --device cuda --npt-repo "$npt_repo" \
    --bishop-repo "$bishop_repo" --rounds "${ROUNDS:-3}" --json "$out/versus-cuda.json"
fi
if [[ $stages == *" precision "* ]]; then
  # shellcheck disable=SC2086  # PRECISION_ARGS is a list of options
  stage precision "${PRECISION_LIMIT:-500}" "$python" -m benchmarks.precision --device cuda ${PRECISION_ARGS:-} \
    --json "$out/precision-cuda.json"
fi
if [[ $stages == *" jobs "* ]]; then
  work=$(mktemp -d)
  # shellcheck disable=SC2086  # JOBS_ARGS is a list of options
  stage jobs "${JOBS_LIMIT:-420}" env TABREPRO_DATA_DIR="$work/data" TABREPRO_RESULTS_DIR="$work/results" \
    "$python" scripts/run_jobs.py --profile "${JOBS_PROFILE:-gpu_calibration}" \
    --mirror "${DATA_MIRROR:?DATA_MIRROR: the datasets for stage jobs}" --log "$work/logs" \
    --job-limit "${JOB_LIMIT:-150}" ${JOBS_ARGS:-}
  (cd "$work" && find results -name metrics.json | tar -czf "$out/jobs-results.tar.gz" -T - && tar -czf "$out/jobs-logs.tar.gz" logs)
fi
exit "$failed"
