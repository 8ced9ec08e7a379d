#!/usr/bin/env python3
"""Replays ctest's -jN start order with known test times and prints the wall time it comes to.

ctest 3.25 orders tests by dependency level (what others depend on first), then by COST; it starts
a test when its dependencies have finished, its PROCESSORS fit in the free slots, and, for a
RUN_SERIAL test, nothing else runs. With the test times of a measured run (its
Testing/Temporary/CTestCostData.txt) this gives that run's wall time within a few seconds, and
with edited times or properties (another build's tests) what a change would come to, without the
machine to measure it on. A test with no time gets 0.5 s.

Usage: ctest_replay.py BUILD_DIR COST_DATA [-j N] [NAME=SECONDS ...]
  BUILD_DIR  a configured build: its tests and their properties (ctest --show-only=json-v1)
  COST_DATA  a CTestCostData.txt with the times (its last column, seconds)
  NAME=SECONDS overrides one test's time.
Prints the wall time and when each test over 20 s starts.
"""
import argparse
import json
import subprocess


def loadTests(build):
    shown = subprocess.run(["ctest", "--test-dir", build, "--show-only=json-v1"], check=True,
                           capture_output=True, text=True).stdout
    tests = {}
    for index, test in enumerate(json.loads(shown)["tests"]):
        props = {p["name"]: p["value"] for p in test.get("properties", [])}
        tests[test["name"]] = {
            "index": index,
            "cost": float(props.get("COST", 0)),
            "deps": set(props.get("DEPENDS", [])),
            "processors": int(props.get("PROCESSORS", 1)),
            "serial": bool(props.get("RUN_SERIAL", False)),
        }
    for test in tests.values():
        test["deps"] &= set(tests)  # a DEPENDS on a test that does not exist is ignored
    return tests


def startOrder(tests):
    # Dependency levels: a test moves one level deeper for each test that depends on it.
    levels = [set(tests)]
    while levels[-1]:
        deeper = set()
        for name in levels[-1]:
            deeper |= tests[name]["deps"]
        levels[-1] -= deeper
        levels.append(deeper)
    levels.pop()
    order, seen = [], set()
    for level in reversed(levels):
        for name in sorted(level, key=lambda n: (-tests[n]["cost"], tests[n]["index"])):
            if name not in seen:
                order.append(name)
                seen.add(name)
    return order


def replay(tests, seconds, jobs):
    pending = startOrder(tests)
    done, running, now, starts = set(), [], 0.0, []
    while pending or running:
        free = jobs - sum(min(tests[n]["processors"], jobs) for _, n in running)
        serialRunning = any(tests[n]["serial"] for _, n in running)
        for name in list(pending):
            if serialRunning:
                break
            test = tests[name]
            need = min(test["processors"], jobs)
            if (test["serial"] and running) or need > free or not test["deps"] <= done:
                continue
            running.append((now + seconds.get(name, 0.5), name))
            pending.remove(name)
            starts.append((now, name))
            free -= need
            serialRunning = test["serial"]
        running.sort()
        now, name = running.pop(0)
        done.add(name)
    return now, starts


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("build")
    parser.add_argument("cost_data")
    parser.add_argument("-j", type=int, default=2)
    parser.add_argument("overrides", nargs="*", metavar="NAME=SECONDS")
    args = parser.parse_args()
    seconds = {}
    with open(args.cost_data) as costs:
        for line in costs:
            fields = line.split()
            if len(fields) == 3:
                seconds[fields[0]] = float(fields[2])
    for override in args.overrides:
        name, value = override.split("=", 1)
        seconds[name] = float(value)
    tests = loadTests(args.build)
    wall, starts = replay(tests, seconds, args.j)
    print(f"ctest_replay: {len(tests)} tests, -j{args.j}: {wall:.0f} s of wall time "
          f"(sum of test times {sum(seconds.get(n, 0.5) for n in tests):.0f} s)")
    for start, name in starts:
        if seconds.get(name, 0.5) > 20:
            print(f"  {start:6.0f} s  {name} ({seconds[name]:.0f} s)")


if __name__ == "__main__":
    main()
