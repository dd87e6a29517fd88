# Sourced by ci/test.sh and ci/setup.sh (from the repository root): the Python that the ci
# scripts install into and run with.
#   - inside a virtual environment already (VIRTUAL_ENV set, or python3's sys.prefix differs
#     from sys.base_prefix): that one;
#   - else .venv at the repository root (git-ignored), made on first use, and put first on
#     the PATH (ci/lib.sh does the same for the other scripts): a distribution's python3 is
#     externally managed (PEP 668) and pip refuses to install into it. It sees the packages
#     of the python3 it was made from (--system-site-packages), so a provisioned interpreter
#     (a CI image, PyCUDA built against the toolkit) is reused, not downloaded again.
# ci_python EXTRAS MODULE...: nothing where every MODULE imports with python3 as it is; else
# that environment (made if need be), and pip install -e ".[EXTRAS]" where a MODULE does not
# import there.
ci_python() {
  local extras=$1; shift
  local imports; imports=$(IFS=,; echo "$*")
  # everything imports already (a provisioned runner, the offline GPU kit): use python3 as it is
  if python3 -c "import $imports" 2>/dev/null; then return 0; fi
  if [ -z "${VIRTUAL_ENV:-}" ] && ! python3 -c 'import sys; sys.exit(sys.prefix == sys.base_prefix)'; then
    if [ ! -x .venv/bin/python3 ]; then
      echo "ci: $(command -v python3) is not in a virtual environment; making one in .venv"
      python3 -m venv --system-site-packages .venv || {
        echo "ci: python3 -m venv failed: install your distribution's venv package (e.g. apt-get install python3-venv) or run inside a virtual environment" >&2
        return 2; }
    fi
    export VIRTUAL_ENV=$PWD/.venv PATH=$PWD/.venv/bin:$PATH
    echo "ci: using .venv (source .venv/bin/activate for gemm in a shell)"
  fi
  if ! python3 -c "import $imports" 2>/dev/null; then
    echo "ci: $(python3 -c "import importlib.util as u; print(', '.join(m for m in '$*'.split() if u.find_spec(m) is None) or 'an import')" 2>/dev/null) missing: pip install -e .[$extras]"
    python3 -m pip install -q -e ".[$extras]"
  fi
}
