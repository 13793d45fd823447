import unittest

from argkit import ArgError, ArgParser


def make():
    p = ArgParser()
    p.option("-n", "--count", type=int, default=1)
    p.option("-o", "--output")
    p.option("-I", "--include", append=True)
    p.flag("-v", "--verbose", count=True)
    p.flag("-q", "--quiet")
    p.positional("files", nargs="*")
    return p


class OptionTests(unittest.TestCase):
    def test_defaults(self):
        ns = make().parse([])
        self.assertEqual(vars(ns), {"count": 1, "output": None, "include": [], "verbose": 0, "quiet": False, "files": []})

    def test_long_forms(self):
        ns = make().parse(["--count", "3", "--output=out.txt", "--quiet"])
        self.assertEqual((ns.count, ns.output, ns.quiet), (3, "out.txt", True))

    def test_short_forms_and_clusters(self):
        ns = make().parse(["-vvq", "-n5", "-o", "x", "-vI", "inc"])
        self.assertEqual((ns.verbose, ns.quiet, ns.count, ns.output, ns.include), (3, True, 5, "x", ["inc"]))

    def test_append(self):
        self.assertEqual(make().parse(["-I", "a", "--include=b", "-Ic"]).include, ["a", "b", "c"])

    def test_equals_value_may_start_with_dash(self):
        self.assertEqual(make().parse(["--output=-weird-"]).output, "-weird-")


class PositionalTests(unittest.TestCase):
    def test_interleaved(self):
        ns = make().parse(["a", "-q", "b"])
        self.assertEqual(ns.files, ["a", "b"])

    def test_double_dash_and_lone_dash(self):
        ns = make().parse(["-", "--", "-q", "--count"])
        self.assertEqual((ns.files, ns.quiet), (["-", "-q", "--count"], False))

    def test_optional_and_required(self):
        p = ArgParser()
        p.positional("src")
        p.positional("dst", nargs="?", default=".")
        self.assertEqual(vars(p.parse(["a"])), {"src": "a", "dst": "."})
        self.assertEqual(vars(p.parse(["a", "b"])), {"src": "a", "dst": "b"})
        with self.assertRaises(ArgError):
            p.parse([])
        with self.assertRaises(ArgError):
            p.parse(["a", "b", "c"])

    def test_typed_positional(self):
        p = ArgParser()
        p.positional("n", type=int)
        self.assertEqual(p.parse(["42"]).n, 42)
        with self.assertRaises(ArgError):
            p.parse(["x"])


class ErrorTests(unittest.TestCase):
    def test_unknown_option(self):
        with self.assertRaises(ArgError):
            make().parse(["--nope"])
        with self.assertRaises(ArgError):
            make().parse(["-x"])

    def test_missing_value(self):
        for argv in (["--output"], ["-o"], ["-o", "-q"]):
            with self.subTest(argv=argv), self.assertRaises(ArgError):
                make().parse(argv)

    def test_flag_with_value(self):
        with self.assertRaises(ArgError):
            make().parse(["--quiet=yes"])

    def test_bad_int(self):
        with self.assertRaises(ArgError):
            make().parse(["-n", "many"])

    def test_bad_definitions(self):
        p = ArgParser()
        with self.assertRaises(ValueError):
            p.option("count")
        with self.assertRaises(ValueError):
            p.option("-ab")


if __name__ == "__main__":
    unittest.main()
