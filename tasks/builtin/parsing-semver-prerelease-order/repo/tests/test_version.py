import unittest

from vercmp import InvalidVersion, Version, max_satisfying, satisfies, sort_versions


class ParseTests(unittest.TestCase):
    def test_full_version(self):
        v = Version.parse("1.2.3-beta.1+build.42")
        self.assertEqual((v.major, v.minor, v.patch), (1, 2, 3))
        self.assertEqual(v.prerelease, ("beta", "1"))
        self.assertEqual(v.build, ("build", "42"))
        self.assertEqual(str(v), "1.2.3-beta.1+build.42")

    def test_leading_v_and_whitespace(self):
        self.assertEqual(str(Version.parse(" v0.9.0 ")), "0.9.0")

    def test_invalid_versions(self):
        for text in ("1.2", "01.2.3", "1.2.3-", "1.2.3-01", "a.b.c"):
            with self.subTest(text=text), self.assertRaises(InvalidVersion):
                Version.parse(text)


class OrderTests(unittest.TestCase):
    def test_core_ordering(self):
        self.assertLess(Version.parse("1.9.0"), Version.parse("1.10.0"))
        self.assertLess(Version.parse("0.0.9"), Version.parse("0.1.0"))

    def test_prerelease_before_release(self):
        self.assertLess(Version.parse("2.0.0-rc.1"), Version.parse("2.0.0"))
        self.assertGreater(Version.parse("2.0.0-rc.1"), Version.parse("1.9.9"))

    def test_build_metadata_does_not_change_equality(self):
        self.assertEqual(Version.parse("1.0.0+a"), Version.parse("1.0.0+b"))
        self.assertEqual(len({Version.parse("1.0.0+a"), Version.parse("1.0.0")}), 1)

    def test_sort_versions(self):
        self.assertEqual(
            [str(v) for v in sort_versions(["1.10.0", "1.2.0", "1.2.0-alpha", "0.9.1"])],
            ["0.9.1", "1.2.0-alpha", "1.2.0", "1.10.0"],
        )


class BumpTests(unittest.TestCase):
    def test_bump_parts(self):
        v = Version.parse("1.4.2+sha.1")
        self.assertEqual(str(v.bump("major")), "2.0.0")
        self.assertEqual(str(v.bump("minor")), "1.5.0")
        self.assertEqual(str(v.bump("patch")), "1.4.3")

    def test_bump_pre_from_release(self):
        self.assertEqual(str(Version.parse("1.4.2").bump("pre")), "1.4.3-rc.1")
        self.assertEqual(str(Version.parse("1.4.3-rc.1").bump("pre")), "1.4.3-rc.2")
        self.assertEqual(str(Version.parse("1.4.3-rc.1").bump("patch")), "1.4.3")


class RangeTests(unittest.TestCase):
    def test_caret_and_tilde(self):
        self.assertTrue(satisfies("1.9.0", "^1.2.3"))
        self.assertFalse(satisfies("2.0.0", "^1.2.3"))
        self.assertTrue(satisfies("0.2.5", "^0.2.1"))
        self.assertFalse(satisfies("0.3.0", "^0.2.1"))
        self.assertFalse(satisfies("1.3.0", "~1.2.0"))

    def test_partial_and_union(self):
        self.assertTrue(satisfies("1.7.3", "1.x"))
        self.assertTrue(satisfies("3.0.1", "<1.0.0 || >=3.0.0"))
        self.assertFalse(satisfies("2.0.0", "<1.0.0 || >=3.0.0"))

    def test_prereleases_excluded_by_default(self):
        self.assertFalse(satisfies("1.5.0-rc.1", ">=1.0.0"))
        self.assertTrue(satisfies("1.5.0-rc.1", ">=1.0.0", include_prerelease=True))

    def test_max_satisfying(self):
        versions = ["1.2.0", "1.4.1", "2.0.0", "1.4.0+build"]
        self.assertEqual(str(max_satisfying(versions, "^1.0.0")), "1.4.1")
        self.assertIsNone(max_satisfying(versions, ">=3"))


if __name__ == "__main__":
    unittest.main()
