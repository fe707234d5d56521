# A Python with PyYAML for the cluster scripts: this machine's python3, or the project's
# virtualenv. Sets `py`; calls `die` (defined by the sourcing script) when there is none.
py=
for candidate in python3 "$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/.venv/bin/python"; do
  if "$candidate" -c 'import yaml' 2>/dev/null; then py=$candidate; break; fi
done
[[ -n $py ]] || die "no Python with PyYAML (python3 -m pip install pyyaml, or make venv)"
