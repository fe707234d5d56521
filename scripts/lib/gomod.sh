# Shared by scripts/toolchain.sh, scripts/cluster-build.sh and scripts/actionlint.sh: building binaries from Go
# modules through throwaway wrapper modules (a module's replace directives only apply when
# it is the main module, so `go install mod@version` refuses most of what we build).
# Source it after setting KNS_SCRIPT (the log prefix) and `work` (a writable temp dir).

# Check the build tools, make the throwaway work dir `work` outside the repository (removed
# on exit; module-cache copies are read-only, hence the chmod) and set pure module mode:
# no workspace file, no toolchain download, no cgo.
gomod_prepare() { # what-is-built repo-root
  command -v go >/dev/null 2>&1 || die "'go' is not on PATH: Go (1.25 or newer) is needed to build $1 from Go modules"
  command -v python3 >/dev/null 2>&1 || die "'python3' is not on PATH (needed to read go.mod metadata)"
  work=$(mktemp -d "${TMPDIR:-/tmp}/kns-$KNS_SCRIPT.XXXXXX")
  case $work/ in "$2"/*) rm -rf "$work"; die "work dir $work is inside the repository; set TMPDIR elsewhere" ;; esac
  trap 'chmod -R u+w "$work" 2>/dev/null; rm -rf "$work"' EXIT
  export GO111MODULE=on GOWORK=off GOTOOLCHAIN=local CGO_ENABLED=0
  unset GOFLAGS
}

# Set repo_root, versions_file (KNS_VERSIONS_FILE overrides it) and tools_root (the cache
# of built tools, KNS_TOOLS_DIR overrides it) and source the pinned versions; every build
# script starts here.
load_versions() {
  repo_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
  tools_root=${KNS_TOOLS_DIR:-$HOME/.cache/kns-platform/tools}
  versions_file=${KNS_VERSIONS_FILE:-$repo_root/versions.env}
  [[ -r $versions_file ]] || die "cannot read versions file $versions_file"
  # shellcheck source=../../versions.env
  . "$versions_file"
}

log() { printf '%s: %s\n' "$KNS_SCRIPT" "$*" >&2; }
warn() { printf '%s: WARNING: %s\n' "$KNS_SCRIPT" "$*" >&2; }
die() { printf '%s: error: %s\n' "$KNS_SCRIPT" "$*" >&2; exit 1; }

# Download module@version and set MOD_DIR, MOD_GOMOD, MOD_TIME, MOD_HASH. On a checksum
# database miss (the proxy's sumdb does not know every pseudo-version) retry once with
# the checksum database off for that module only (GONOSUMDB, kept for the later builds),
# and say so.
mod_download() { # module version
  local out rc=0 err=$work/download.$BASHPID.err # one file per parallel job
  out=$(cd "$work" && go mod download -json "$1@$2" 2>"$err") || rc=$?
  if ((rc != 0)) && grep -q 'sumdb\|verifying' <<<"$out" && ! grep -q 'not available' <<<"$out"; then
    warn "the checksum database has no entry for $1@$2: fetching it with GONOSUMDB=$1"
    export GONOSUMDB=${GONOSUMDB:+$GONOSUMDB,}$1
    rc=0
    out=$(cd "$work" && go mod download -json "$1@$2" 2>"$err") || rc=$?
  fi
  if ((rc != 0)); then
    { python3 -c 'import json,sys; print(json.loads(sys.stdin.read()).get("Error", ""))' <<<"$out" 2>/dev/null ||
      printf '%s\n' "$out"; cat "$err"; } | sed "/^\$/d; s/^/$KNS_SCRIPT:   /" >&2
    return 1
  fi
  IFS=$'\t' read -r MOD_DIR MOD_GOMOD MOD_TIME MOD_HASH < <(python3 -c '
import json, sys
d = json.loads(sys.stdin.read())
info = {}
if d.get("Info"):
  with open(d["Info"]) as f:
      info = json.load(f)
origin = d.get("Origin") or info.get("Origin") or {}
print(*(v or "-" for v in (d.get("Dir"), d.get("GoMod"), info.get("Time"), origin.get("Hash"))), sep="\t")
' <<<"$out")
}


# Write a wrapper go.mod in $1 requiring $2@$3 that stands in for the module's replace
# directives (they only apply to a main module): a replacement by a published version is
# copied; a replacement by a local path becomes a requirement of the replaced module at
# the pinned version (module=version args after $4), or at the version the module
# requires if that is a real one; replacements that only forbid a module are dropped.
write_wrapper() { # dir module version gomod [module=version ...]
  local dir=$1 mod=$2 ver=$3 gomod=$4
  shift 4
  mkdir -p "$dir"
  (cd "$dir" && go mod edit -json "$gomod") | python3 -c '
import json, sys
wrapper, mod, ver = sys.argv[1:4]
pins = dict(p.split("=", 1) for p in sys.argv[4:])
m = json.load(sys.stdin)
required = {r["Path"]: r["Version"] for r in m.get("Require") or []}
lines = ["module kns.local/" + wrapper, "", "go " + (m.get("Go") or "1.25"), ""]
reqs = {mod: ver}
reps = []
for r in m.get("Replace") or []:
    old, new = r["Old"]["Path"], r["New"]
    if new.get("Version"):
        lhs = old + (" " + r["Old"]["Version"] if r["Old"].get("Version") else "")
        reps.append("\t%s => %s %s" % (lhs, new["Path"], new["Version"]))
    elif old in pins:
        reqs[old] = pins[old]
    elif required.get(old) and required[old] != "v0.0.0":
        reqs[old] = required[old]
    elif "FORBIDDEN" in new["Path"]:
        continue
    else:
        sys.exit("no published version for locally replaced module %s (pin it)" % old)
for p, v in pins.items():
    reqs.setdefault(p, v)
lines.append("require (")
lines += ["\t%s %s" % (p, v) for p, v in sorted(reqs.items())]
lines.append(")")
if reps:
    lines += ["", "replace ("] + reps + [")"]
print("\n".join(lines))
' "$(basename "$dir")" "$mod" "$ver" "$@" >"$dir/go.mod"
}

go_build() { # dir output tags ldflags package
  local start=$SECONDS
  log "building $(basename "$2") ($5) ..."
  (cd "$1" && GOFLAGS=-mod=mod ${KNS_BUILD_NICE:+nice -n "$KNS_BUILD_NICE"} go build -trimpath -tags "$3" -ldflags "$4" -o "$2.tmp" "$5") ||
    die "go build of $5 failed"
  mv -f "$2.tmp" "$2"
  log "built $2 in $((SECONDS - start))s"
}

# Independent builds run side by side (docs/testing.md, "Build time"): a Go build spends much
# of its time downloading modules and linking on one core, which another build can overlap.
# `parallel NAME CMD...` starts CMD in a subshell (a `die` there ends only that job);
# `parallel_wait` waits for every job started and fails naming the ones that failed.
# KNS_BUILD_JOBS=N runs at most N jobs at once (1: one after another, each reusing what the
# others compiled into the shared Go build cache; bench/cold_builds.py measures both).
parallel_pids=() parallel_names=() parallel_failed=()
parallel() { # name command...
  local name=$1 limit=${KNS_BUILD_JOBS:-0}
  shift
  [[ $limit =~ ^[0-9]+$ ]] || die "KNS_BUILD_JOBS must be a number of jobs (got '$limit')"
  while ((limit > 0 && ${#parallel_pids[@]} >= limit)); do
    wait "${parallel_pids[0]}" || parallel_failed+=("${parallel_names[0]}")
    parallel_pids=("${parallel_pids[@]:1}") parallel_names=("${parallel_names[@]:1}")
  done
  ("$@") &
  parallel_pids+=("$!")
  parallel_names+=("$name")
}

parallel_wait() {
  local i failed=("${parallel_failed[@]}")
  for i in "${!parallel_pids[@]}"; do
    wait "${parallel_pids[$i]}" || failed+=("${parallel_names[$i]}")
  done
  parallel_pids=() parallel_names=() parallel_failed=()
  ((${#failed[@]} == 0)) || die "failed: ${failed[*]} (its error is above)"
}
