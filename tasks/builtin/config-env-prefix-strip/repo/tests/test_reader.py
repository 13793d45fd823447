import unittest

from envcfg import coerce, from_environ, to_environ


class CoerceTests(unittest.TestCase):
    def test_scalars(self):
        self.assertEqual(coerce(" 42 "), 42)
        self.assertEqual(coerce("-3.5"), -3.5)
        self.assertIs(coerce("Yes"), True)
        self.assertIs(coerce("off"), False)
        self.assertIsNone(coerce("null"))
        self.assertEqual(coerce(" hello "), "hello")

    def test_json(self):
        self.assertEqual(coerce('{"a": [1]}'), {"a": [1]})
        self.assertEqual(coerce("[broken"), "[broken")


class FromEnvironTests(unittest.TestCase):
    def test_nested(self):
        env = {"SVC_DB__HOST": "db", "SVC_DB__USER": "app", "SVC_DEBUG": "1", "HOME": "/root"}
        self.assertEqual(from_environ("SVC_", env), {"db": {"host": "db", "user": "app"}, "debug": True})

    def test_single_underscore_kept(self):
        self.assertEqual(from_environ("SVC_", {"SVC_LOG_LEVEL": "info"}), {"log_level": "info"})

    def test_untyped(self):
        self.assertEqual(from_environ("SVC_", {"SVC_WORKERS": "4"}, typed=False), {"workers": "4"})

    def test_conflicts(self):
        with self.assertRaises(ValueError):
            from_environ("SVC_", {"SVC_DB": "x", "SVC_DB__HOST": "y"})
        with self.assertRaises(ValueError):
            from_environ("SVC_", {"SVC_DB____HOST": "y"})

    def test_prefix_required(self):
        with self.assertRaises(ValueError):
            from_environ("", {})


class ToEnvironTests(unittest.TestCase):
    def test_flatten(self):
        self.assertEqual(
            to_environ({"db": {"host": "db"}, "debug": False, "tags": ["a"]}, "SVC_"),
            {"SVC_DB__HOST": "db", "SVC_DEBUG": "false", "SVC_TAGS": '["a"]'},
        )


if __name__ == "__main__":
    unittest.main()
