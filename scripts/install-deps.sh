#!/usr/bin/env bash
# Installs the Debian packages pipesim needs, only those missing. Run as root or with sudo available.
set -euo pipefail
packages=(cmake g++ make libboost-graph-dev nlohmann-json3-dev libfmt-dev libcli11-dev libgtest-dev libgmock-dev zlib1g-dev
          libbenchmark-dev python3 python3-nbformat python3-nbconvert python3-ipykernel python3-matplotlib jupyter-nbconvert
          libopenmpi-dev openmpi-bin clang libclang-rt-14-dev pybind11-dev python3-dev python3-numpy python3-pandas
          python3-distributed)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing: ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" > /dev/null
fi
