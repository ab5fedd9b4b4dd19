"""Judged apart: the command runs in the jail (node over the workspace); its status and output come
back here and are compared with literals."""

import json
import unittest

from jail import WORKSPACE, run


def deploy(*args: str) -> tuple[int, str, str]:
    return run(["node", f"{WORKSPACE}/bin/deploy.js", *args])


class DefaultRegionTest(unittest.TestCase):
    def test_with_no_region_the_plan_goes_to_the_residency_region(self) -> None:
        status, out, _ = deploy("billing", "--build", "41")
        self.assertEqual(status, 0)
        self.assertEqual(json.loads(out)["region"], "eu-central-2")

    def test_an_explicit_region_still_wins(self) -> None:
        self.assertEqual(json.loads(deploy("billing", "-b", "7", "--region", "us-east-1")[1])["region"], "us-east-1")


if __name__ == "__main__":
    unittest.main()
