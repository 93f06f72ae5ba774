"""Where a test run's time goes, from its JUnit XML: seconds per tier (the generated test
function) and per kernel family (the test file), summed over tests, as Markdown.

    python ci/profile.py validation-report/junit.xml

The sums are the time the tests themselves took (setup, call and teardown, as pytest times
them); with N workers the wall time is about their total over N, plus start-up. Kept in
``ci/profile.md``, rerun after each change to the suite's speed.
"""

import sys
import xml.etree.ElementTree as tree
from collections import Counter


def profile(junit):
    tiers, families, counts = Counter(), Counter(), Counter()
    for case in tree.parse(junit).iter("testcase"):
        seconds = float(case.get("time") or 0)
        name = case.get("name", "").split("[")[0]
        tiers[name] += seconds
        counts[name] += 1
        families[case.get("classname", "").split(".")[1 if "." in case.get("classname", "") else 0]] += seconds
    return tiers, counts, families


def main(junit, top=12):
    tiers, counts, families = profile(junit)
    total = sum(tiers.values())
    lines = [f"total test time: {total:.0f} s over {sum(counts.values())} tests", "",
             "| tier (test) | tests | seconds | share |", "|---|---|---|---|"]
    for name, seconds in tiers.most_common(top):
        lines.append(f"| {name} | {counts[name]} | {seconds:.0f} | {seconds / total:.0%} |")
    lines += ["", "| family (file) | seconds |", "|---|---|"]
    lines += [f"| {name} | {seconds:.0f} |" for name, seconds in families.most_common(top)]
    print("\n".join(lines))


if __name__ == "__main__":
    main(sys.argv[1])
