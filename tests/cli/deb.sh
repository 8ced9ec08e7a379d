#!/usr/bin/env bash
# The Debian packages: cpack builds kiln and kiln-dev from the build tree, their contents, SONAME,
# dependencies, copyright and changelog are checked, lintian reports no errors, and (as root) both
# are installed with dpkg, used (the tools from /usr/bin, a C++17 find_package(kiln) consumer and
# pkg-config against /usr), removed (dpkg -r: none of their files left) and purged (no dpkg record).
# Usage: deb.sh BUILD_DIR WORK_DIR
set -uo pipefail
source "$(dirname "$0")/lib.sh"
needArgs 2 "BUILD_DIR WORK_DIR" "$@"
build=$(realpath "$1")
makeWork kiln-deb "$(realpath -m "$2")"
version=$(sed -n 's/^CMAKE_PROJECT_VERSION:STATIC=//p' "$build/CMakeCache.txt")
tools=(kiln atc converter_lite benchmark)

if ! command -v dpkg-deb >/dev/null; then
  echo "SKIP every .deb check: dpkg-deb is absent (not a Debian system)"
  finish
  exit
fi

# cpack into the work folder, so the build tree and another test's cpack are left alone.
run cpack --config "$build/CPackConfig.cmake" -B "$work/packages"
runtime_deb=$(ls "$work/packages"/kiln_*.deb 2>/dev/null)
dev_deb=$(ls "$work/packages"/kiln-dev_*.deb 2>/dev/null)
if [ $status -eq 0 ] && [ -f "$runtime_deb" ] && [ -f "$dev_deb" ]; then
  pass "cpack wrote $(basename "$runtime_deb") and $(basename "$dev_deb")"
else
  fail "cpack: kiln and kiln-dev packages" "exit $status"
  finish
  exit
fi
deb_version=$(dpkg-deb -f "$runtime_deb" Version)
if [[ $deb_version == "$version"-* ]] && [ "$(dpkg-deb -f "$dev_deb" Version)" = "$deb_version" ]; then
  pass "both packages are version $deb_version (project $version, Debian revision from cmake/debian/changelog)"
else
  fail "package versions" "kiln $deb_version, kiln-dev $(dpkg-deb -f "$dev_deb" Version), project $version"
fi
if [ "$(dpkg-deb -f "$runtime_deb" Maintainer)" = "kiln maintainers <kiln@example.org>" ]; then
  pass "Maintainer: kiln maintainers <kiln@example.org>"
else
  fail "Maintainer" "$(dpkg-deb -f "$runtime_deb" Maintainer)"
fi

# contains LISTING PATH...: each PATH ("./usr/..." or "./usr/... -> target") is a line of LISTING.
contains() {
  local listing=$1 path missing=""
  shift
  for path in "$@"; do
    grep -qxF "$path" <<<"$listing" || missing="$missing $path"
  done
  echo "$missing"
}
runtime_listing=$(dpkg-deb -c "$runtime_deb" | awk '{ $1 = $2 = $3 = $4 = $5 = ""; sub(/^ +/, ""); print }')
dev_listing=$(dpkg-deb -c "$dev_deb" | awk '{ $1 = $2 = $3 = $4 = $5 = ""; sub(/^ +/, ""); print }')
missing=$(contains "$runtime_listing" ./usr/bin/kiln ./usr/bin/atc ./usr/bin/converter_lite ./usr/bin/benchmark \
  "./usr/lib/libkiln.so.0 -> libkiln.so.$version" "./usr/lib/libkiln.so.$version" \
  ./usr/share/doc/kiln/copyright ./usr/share/doc/kiln/changelog.Debian.gz)
if [ -z "$missing" ] && ! grep -qE '^\./usr/(include/|lib/libkiln\.so |lib/cmake/)' <<<"$runtime_listing"; then
  pass "kiln holds the four tools, libkiln.so.$version with its libkiln.so.0 link, copyright and changelog; no development files"
else
  fail "kiln contents" "missing:${missing:- none}; $(grep -E '^\./usr/(include/|lib/libkiln\.so |lib/cmake/)' <<<"$runtime_listing" | head -3)"
fi
missing=$(contains "$dev_listing" ./usr/include/kiln/ir/graph.h "./usr/lib/libkiln.so -> libkiln.so.0" \
  ./usr/lib/cmake/kiln/kilnConfig.cmake ./usr/lib/cmake/kiln/kilnTargets.cmake ./usr/lib/pkgconfig/kiln.pc \
  ./usr/share/doc/kiln-dev/copyright ./usr/share/doc/kiln-dev/changelog.Debian.gz)
if [ -z "$missing" ] && ! grep -qE '^\./usr/(bin/|lib/libkiln\.so\.)' <<<"$dev_listing"; then
  pass "kiln-dev holds the headers, the CMake package, kiln.pc, the libkiln.so link, copyright and changelog; no tools or library"
else
  fail "kiln-dev contents" "missing:${missing:- none}"
fi

for deb in "$runtime_deb" "$dev_deb"; do dpkg-deb -x "$deb" "$work/root"; done
soname=$(readelf -d "$work/root/usr/lib/libkiln.so.$version" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
needed=$(readelf -d "$work/root/usr/bin/kiln" | sed -n 's/.*(NEEDED).*\[\(libkiln[^]]*\)\]/\1/p')
if [ "$soname" = libkiln.so.0 ] && [ "$needed" = libkiln.so.0 ]; then
  pass "libkiln's SONAME is libkiln.so.0 and /usr/bin/kiln needs libkiln.so.0"
else
  fail "SONAME" "SONAME '$soname', kiln needs '$needed'"
fi
unstripped=$(file "$work/root/usr/bin/"* "$work/root/usr/lib/libkiln.so.$version" | grep -v ', stripped' | cut -d: -f1)
if [ -z "$unstripped" ]; then
  pass "the tools and libkiln are stripped"
else
  fail "stripped files" "not stripped: $unstripped"
fi
runtime_depends=$(dpkg-deb -f "$runtime_deb" Depends)
if grep -q libprotobuf <<<"$runtime_depends" && grep -q libopenblas <<<"$runtime_depends"; then
  pass "kiln depends on the shared libraries it links (dpkg-shlibdeps)"
else
  fail "kiln Depends" "$runtime_depends"
fi
# kiln-dev: kiln of the same version, then the -dev package of each find_dependency() in the CMake
# package it ships, in the same order.
found_packages=$(sed -n 's/^find_dependency(\([A-Za-z_]*\))$/\1/p' "$work/root/usr/lib/cmake/kiln/kilnConfig.cmake" | tr '\n' ' ')
dev_depends=$(dpkg-deb -f "$dev_deb" Depends)
expected_dev_depends="kiln (= $deb_version), libonnx-dev, libprotobuf-dev, libfmt-dev, libspdlog-dev, nlohmann-json3-dev"
if [ "$found_packages" = "ONNX Protobuf fmt spdlog nlohmann_json " ] && [ "$dev_depends" = "$expected_dev_depends" ]; then
  pass "kiln-dev Depends: $dev_depends (kilnConfig.cmake finds $found_packages)"
else
  fail "kiln-dev Depends" "'$dev_depends'; kilnConfig.cmake finds '$found_packages'"
fi
copyright="$work/root/usr/share/doc/kiln/copyright"
if [ "$(head -1 "$copyright")" = "Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/" ] &&
   grep -qx "License: Apache-2.0" "$copyright" && cmp -s "$copyright" "$work/root/usr/share/doc/kiln-dev/copyright"; then
  pass "/usr/share/doc/kiln{,-dev}/copyright: machine-readable (DEP-5), Apache-2.0"
else
  fail "copyright" "$(head -3 "$copyright")"
fi
changelog_version=$(zcat "$work/root/usr/share/doc/kiln/changelog.Debian.gz" | dpkg-parsechangelog -l - -S Version 2>&1)
if [ "$changelog_version" = "$deb_version" ]; then
  pass "changelog.Debian.gz parses; its latest entry is $deb_version"
else
  fail "changelog.Debian.gz" "latest entry '$changelog_version', package $deb_version"
fi
# checkVersions BIN_DIR LABEL: each tool in BIN_DIR, run from /, prints "<tool> (kiln) VERSION".
checkVersions() {
  local tool wrong=0
  for tool in "${tools[@]}"; do
    run env -C / "$1/$tool" --version
    if [ $status -ne 0 ] || [ "$(head -1 "$work/stdout")" != "$tool (kiln) $version" ]; then
      fail "$2: $tool --version" "exit $status"
      wrong=1
    fi
  done
  [ $wrong -eq 1 ] || pass "$2: kiln, atc, converter_lite, benchmark --version print '<tool> (kiln) $version'"
}
checkVersions "$work/root/usr/bin" "unpacked (libkiln.so.0 through \$ORIGIN/../lib)"

am_root=false
[ "$(id -u)" = 0 ] && am_root=true
if ! command -v lintian >/dev/null && $am_root && command -v apt-get >/dev/null; then
  echo "lintian is absent: apt-get install lintian (log: $work/lintian-install.log)"
  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends lintian >"$work/lintian-install.log" 2>&1
fi
if command -v lintian >/dev/null; then
  # --no-cfg: a user's ~/.config/lintian cannot hide tags; lintian warns on stderr when run as root.
  lintian --no-cfg "$runtime_deb" "$dev_deb" >"$work/lintian.txt" 2>"$work/stderr"
  errors=$(grep -c '^E:' "$work/lintian.txt")
  warnings=$(grep -c '^W:' "$work/lintian.txt")
  if [ "$errors" -eq 0 ] && ! grep -q '^' <(grep -v 'running with root privileges' "$work/stderr"); then
    pass "lintian: no errors on kiln and kiln-dev ($warnings warnings)"
  else
    rm -f "$work/stdout" "$work/stderr"
    fail "lintian: $errors errors" "$(grep '^E:' "$work/lintian.txt")"
  fi
else
  echo "SKIP lintian: not installed, and apt-get install needs root (scripts/install-deps.sh lists it)"
fi

# Installing into /usr, on a machine others may share: only as root, only when no kiln package is
# installed and none of its files would replace one dpkg does not know of; one run at a time
# (flock); purged at exit whatever happens.
if ! $am_root || ! command -v dpkg >/dev/null; then
  echo "SKIP dpkg -i / --purge of kiln and kiln-dev: $($am_root && echo "dpkg is absent" || echo "not root (uid $(id -u))")"
  finish
  exit
fi
exec 9>/tmp/kiln-deb-test.lock
flock -w 600 9 || { fail "flock /tmp/kiln-deb-test.lock" "another run held it for 10 minutes"; finish; exit; }
installed_before=$(dpkg-query -W -f='${Package} ${Status}\n' kiln kiln-dev 2>/dev/null | grep ' installed$')
unowned=""
for path in $(grep -v '/$' <<<"$runtime_listing"$'\n'"$dev_listing" | sed 's/ -> .*//; s/^\.//'); do
  if [ -e "$path" ] || [ -L "$path" ]; then
    dpkg -S "$path" >/dev/null 2>&1 || unowned="$unowned $path"
  fi
done
if [ -n "$installed_before" ] || [ -n "$unowned" ]; then
  echo "SKIP dpkg -i / --purge: ${installed_before:+already installed: $installed_before; }${unowned:+files no package owns would be replaced:$unowned}"
  finish
  exit
fi
trap 'dpkg --purge kiln-dev kiln >/dev/null 2>&1; rm -rf "$work"' EXIT

run dpkg -i "$runtime_deb" "$dev_deb"
if [ $status -eq 0 ] && [ "$(dpkg-query -W -f='${Status}' kiln kiln-dev)" = "install ok installedinstall ok installed" ]; then
  pass "dpkg -i kiln kiln-dev: both installed"
else
  fail "dpkg -i kiln kiln-dev" "exit $status"
fi
owned=$(dpkg -L kiln kiln-dev | grep -vx '/\.')
checkVersions /usr/bin "installed in /usr/bin"
# (/lib is /usr/lib on Debian 12. The cache is read whole first: grep -q stopping early would
# fail the pipe under pipefail.)
if grep -qE 'libkiln\.so\.0 .*=> (/usr)?/lib/libkiln\.so\.0$' <<<"$(ldconfig -p)"; then
  pass "ldconfig's cache lists /usr/lib/libkiln.so.0 (the package's ldconfig trigger ran)"
else
  rm -f "$work/stdout" "$work/stderr"
  fail "ldconfig -p" "no libkiln.so.0 in /usr/lib: $(grep libkiln <<<"$(ldconfig -p)")"
fi

# A consumer of the installed kiln-dev: find_package(kiln) from /usr with no hints, asking for C++17
# (the target's cxx_std_20 raises it), and pkg-config's default search path.
mkdir -p "$work/consumer"
cat >"$work/consumer/consumer.cpp" <<'CPP'
#include <iostream>
#include "kiln/ir/graph.h"
#include "kiln/support/version.h"
int main() {
  kiln::Graph graph;
  std::cout << kiln::versionString() << " " << graph.nodes().size() << "\n";
}
CPP
cat >"$work/consumer/CMakeLists.txt" <<'CMAKE'
cmake_minimum_required(VERSION 3.22)
project(consumer CXX)
set(CMAKE_CXX_STANDARD 17)
find_package(kiln REQUIRED)
add_executable(consumer consumer.cpp)
target_link_libraries(consumer PRIVATE kiln::kiln)
CMAKE
run cmake -S "$work/consumer" -B "$work/consumer/build"
[ $status -eq 0 ] && run cmake --build "$work/consumer/build"
if [ $status -eq 0 ] && [ "$("$work/consumer/build/consumer")" = "$version 0" ]; then
  pass "find_package(kiln) from the installed kiln-dev: a C++17 consumer of kiln/ir/graph.h builds and runs"
else
  fail "find_package(kiln) from /usr" "exit $status"
fi
run g++ -std=c++20 "$work/consumer/consumer.cpp" -o "$work/consumer_pc" $(pkg-config --cflags --libs kiln)
if [ $status -eq 0 ] && [ "$(pkg-config --modversion kiln)" = "$version" ] && [ "$("$work/consumer_pc")" = "$version 0" ]; then
  pass "pkg-config kiln from /usr/lib/pkgconfig: a consumer builds and runs"
else
  fail "pkg-config kiln from /usr" "exit $status"
fi

# dpkg -r already takes every file away (the packages have no conffiles); --purge then drops
# dpkg's record of them.
run dpkg -r kiln-dev kiln
if [ $status -eq 0 ] && ! dpkg-query -W -f='${Status}\n' kiln kiln-dev 2>/dev/null | grep -q ' installed$'; then
  pass "dpkg -r kiln-dev kiln"
else
  fail "dpkg -r kiln-dev kiln" "exit $status"
fi
# Every path dpkg -L listed is gone, but for directories other packages own (/usr/bin ...).
left=""
while read -r path; do
  if [ -L "$path" ] || [ -e "$path" ] && { [ ! -d "$path" ] || ! dpkg -S "$path" >/dev/null 2>&1; }; then
    left="$left $path"
  fi
done <<<"$owned"
if [ -z "$left" ] && ! grep -q libkiln <<<"$(ldconfig -p)"; then
  pass "after dpkg -r none of the $(wc -l <<<"$owned") paths dpkg -L listed remain (but directories other packages own), libkiln is out of ldconfig's cache"
else
  rm -f "$work/stdout" "$work/stderr"
  fail "left behind after dpkg -r" "${left:-(ldconfig still lists libkiln)}"
fi
run dpkg --purge kiln-dev kiln
record=$(dpkg-query -W -f='${Package} ${Status}\n' kiln kiln-dev 2>/dev/null | grep -v ' not-installed$')
if [ $status -eq 0 ] && [ -z "$record" ]; then
  pass "dpkg --purge kiln-dev kiln: dpkg keeps no record of either"
else
  fail "dpkg --purge kiln-dev kiln" "exit $status; $record"
fi
finish
