#!/bin/bash
# Copies this machine's Open MPI launcher (mpirun, orted), its components,
# help texts and PMIx's components into DEST/ompi, and the shared libraries
# they load into DEST/lib, so that a GPU machine without a package registry
# can start several ranks (scripts/cuda-device-check.sh's zero-mpi stage).
# There the copy is relocated by OPAL_PREFIX (see ompi_env below, which the
# device check sources):
#
#   scripts/pack-openmpi.sh DEST        # here, by scripts/make-device-pack.sh
#   . scripts/pack-openmpi.sh --env DIR # there: PATH, OPAL_PREFIX, ... for DIR
#
# Components for networks a one-node run never uses (UCX, libfabric,
# InfiniBand verbs, PSM) are left out with their libraries; the ranks talk
# over shared memory (btl self,vader; pml ob1), else TCP.
ompi_env() {
  local dir=$1
  export OPAL_PREFIX=$dir/ompi
  export PATH=$dir/ompi/bin:$PATH
  export LD_LIBRARY_PATH=$dir/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  export PMIX_MCA_mca_base_component_path=$dir/ompi/pmix
  export PMIX_INSTALL_PREFIX=$dir/ompi
  # Shared memory first; TCP where /dev/shm is too small. Containers often
  # forbid the cross-memory attach vader would use for large messages.
  export OMPI_MCA_pml=ob1 OMPI_MCA_btl=self,vader,tcp OMPI_MCA_osc=pt2pt,sm,rdma
  export OMPI_MCA_btl_vader_single_copy_mechanism=none
  export OMPI_MCA_mtl=^ofi,psm,psm2 OMPI_MCA_btl_base_warn_component_unused=0
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
}
if [ "${1:-}" = "--env" ]; then
  ompi_env "$2"
  return 0 2>/dev/null || exit 0
fi
set -eu
DEST=${1:?usage: pack-openmpi.sh DEST}
launcher=$(readlink -f "$(command -v mpirun)")
case $(basename "$launcher") in
  orterun) ;;
  *) echo "pack-openmpi: mpirun is $launcher, not Open MPI 4's orterun" >&2; exit 1 ;;
esac
pkglib=$(ompi_info --path pkglibdir --parsable | sed 's/^path:pkglibdir://')
libdir=$(ompi_info --path libdir --parsable | sed 's/^path:libdir://')
pkgdata=$(ompi_info --path pkgdatadir --parsable | sed 's/^path:pkgdatadir://')
prefix=$(ompi_info --path prefix --parsable | sed 's/^path:prefix://')
O=$DEST/ompi
mkdir -p "$O/bin" "$O${pkglib#$prefix}" "$O${pkgdata#$prefix}" "$O/pmix" "$DEST/lib"
cp -L "$launcher" "$O/bin/mpirun"
cp -L "$(dirname "$launcher")/orted" "$O/bin/orted"
skip='ucx|ofi|openib|verbs|psm|portals|usnic|ofed|java|cuda|fca|hcoll|mxm|ugni|knem|xpmem'
for so in "$pkglib"/*.so; do
  basename "$so" | grep -qE "$skip" || cp -L "$so" "$O${pkglib#$prefix}/"
done
cp -r "$pkgdata/." "$O${pkgdata#$prefix}/"
# Open MPI's external PMIx and its components.
pmixlib=$(ldconfig -p | awk '/libpmix\.so\.2 / {print $NF; exit}')
[ -n "$pmixlib" ] || pmixlib=$(ls /usr/lib/x86_64-linux-gnu/pmix2/lib/libpmix.so.2 2>/dev/null || true)
if [ -n "$pmixlib" ] && [ -d "$(dirname "$(readlink -f "$pmixlib")")/pmix" ]; then
  cp -L "$(dirname "$(readlink -f "$pmixlib")")"/pmix/*.so "$O/pmix/" 2>/dev/null || true
fi
# Every library the launcher and the kept components load, except the C
# library's own and those of the left-out networks. The pmix component finds
# libpmix through its RUNPATH here; there through LD_LIBRARY_PATH.
for f in "$O/bin/mpirun" "$O/bin/orted" "$O${pkglib#$prefix}"/*.so "$O"/pmix/*.so; do
  [ -e "$f" ] && ldd "$f" 2>/dev/null
done | awk '$3 ~ /^\// {print $1, $3}' | sort -u |
  while read -r name path; do
    case $name in
      libc.so*|libm.so*|libdl.so*|librt.so*|libpthread.so*|libstdc++*|libgcc_s*|ld-linux*) ;;
      *ucx*|*fabric*|*ibverbs*|*rdmacm*|*psm*|*efa*) ;;
      *) [ -e "$DEST/lib/$name" ] || cp -L "$path" "$DEST/lib/$name" ;;
    esac
  done
[ -n "$pmixlib" ] && cp -L "$pmixlib" "$DEST/lib/libpmix.so.2"
du -sh "$O" "$DEST/lib" | tr '\n' ' '
echo
