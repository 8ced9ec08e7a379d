#!/usr/bin/env bash
# Install and package: `cmake --install` into a prefix, the tools' --version from another folder, the
# installed tree moved elsewhere still runs (RUNPATH $ORIGIN/../lib), the library found through
# pkg-config and find_package(kiln) by small consumers (C++17 and C++20). The .deb packages: deb.sh.
# Usage: install.sh BUILD_DIR WORK_DIR
set -uo pipefail
build=$(realpath "$1")
work=$(realpath -m "$2")
rm -rf "$work" && mkdir -p "$work"
source "$(dirname "$0")/lib.sh"
version=$(sed -n 's/^CMAKE_PROJECT_VERSION:STATIC=//p' "$build/CMakeCache.txt")

if cmake --install "$build" --prefix "$work/prefix" >"$work/stdout" 2>"$work/stderr"; then
  pass "cmake --install --prefix"
else
  fail "cmake --install --prefix" "exit $?"
fi
check_versions() {  # PREFIX LABEL
  local tool
  for tool in kiln atc converter_lite benchmark; do
    (cd / && "$1/bin/$tool" --version) >"$work/stdout" 2>"$work/stderr"
    local status=$?
    if [ $status -eq 0 ] && [ "$(head -1 "$work/stdout")" = "$tool (kiln) $version" ]; then
      pass "$2: $tool --version from / prints '$tool (kiln) $version'"
    else
      fail "$2: $tool --version" "exit $status"
    fi
  done
}
check_versions "$work/prefix" installed
if grep -q "not device-runnable" <("$work/prefix/bin/atc" --version); then
  pass "atc --version says the .om is not device-runnable"
else
  fail "atc --version" "no device-runnable note"
fi
mv "$work/prefix" "$work/moved"
check_versions "$work/moved" "moved tree"

# pkg-config: a consumer built from the .pc alone.
cat >"$work/consumer.cpp" <<'CPP'
#include <iostream>
#include "kiln/support/version.h"
int main() { std::cout << kiln::versionString() << "\n"; }
CPP
export PKG_CONFIG_PATH="$work/moved/lib/pkgconfig"
if [ "$(pkg-config --modversion kiln)" = "$version" ] &&
   g++ -std=c++20 "$work/consumer.cpp" -o "$work/consumer_pc" $(pkg-config --cflags --libs kiln) \
     -Wl,-rpath,"$work/moved/lib" >"$work/stdout" 2>"$work/stderr" &&
   [ "$("$work/consumer_pc")" = "$version" ]; then
  pass "pkg-config kiln: a consumer builds and prints $version"
else
  fail "pkg-config kiln" "see output"
fi

# CMake package: find_package(kiln) gives kiln::kiln, whose interface carries C++20 (cxx_std_20): a
# consumer that asks for C++17 is raised to C++20 by CMake instead of failing inside kiln's headers.
mkdir -p "$work/cmake_consumer"
cat >"$work/cmake_consumer/consumer.cpp" <<'CPP'
#include <iostream>
#include "kiln/ir/graph.h"
#include "kiln/support/version.h"
int main() {
  kiln::Graph graph;
  std::cout << kiln::versionString() << " " << graph.nodes().size() << "\n";
}
CPP
cat >"$work/cmake_consumer/CMakeLists.txt" <<'CMAKE'
cmake_minimum_required(VERSION 3.22)
project(consumer CXX)
find_package(kiln REQUIRED)
add_executable(consumer consumer.cpp)
target_link_libraries(consumer PRIVATE kiln::kiln)
CMAKE
for standard in 17 20; do
  consumer_build="$work/cmake_consumer/build$standard"
  if cmake -S "$work/cmake_consumer" -B "$consumer_build" -DCMAKE_PREFIX_PATH="$work/moved" \
       -DCMAKE_CXX_STANDARD=$standard >"$work/stdout" 2>"$work/stderr" &&
     cmake --build "$consumer_build" >>"$work/stdout" 2>>"$work/stderr" &&
     [ "$("$consumer_build/consumer")" = "$version 0" ]; then
    pass "find_package(kiln), CMAKE_CXX_STANDARD $standard: kiln::kiln (ir/graph.h) builds and runs"
  else
    fail "find_package(kiln), CMAKE_CXX_STANDARD $standard" "see output"
  fi
done

finish
