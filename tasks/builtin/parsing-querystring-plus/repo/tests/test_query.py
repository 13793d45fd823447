import unittest

from qsparse import build_query, parse_qs, parse_qsl, percent_decode


class ParseTests(unittest.TestCase):
    def test_simple_pairs(self):
        self.assertEqual(parse_qsl("a=1&b=2"), [("a", "1"), ("b", "2")])

    def test_leading_question_mark(self):
        self.assertEqual(parse_qs("?page=3"), {"page": ["3"]})

    def test_repeated_keys_collect_values(self):
        self.assertEqual(parse_qs("tag=x&tag=y&n=1"), {"tag": ["x", "y"], "n": ["1"]})

    def test_blank_values_dropped_by_default(self):
        self.assertEqual(parse_qsl("a=&b=2&c"), [("b", "2")])

    def test_blank_values_kept_on_request(self):
        self.assertEqual(parse_qsl("a=&b=2&c", keep_blank_values=True), [("a", ""), ("b", "2"), ("c", "")])

    def test_plus_means_space(self):
        self.assertEqual(parse_qs("q=hello+world"), {"q": ["hello world"]})

    def test_utf8_escapes(self):
        self.assertEqual(parse_qs("city=S%C3%A3o+Paulo"), {"city": ["São Paulo"]})

    def test_custom_separator(self):
        self.assertEqual(parse_qsl("a=1;b=2", separator=";"), [("a", "1"), ("b", "2")])


class DecodeTests(unittest.TestCase):
    def test_invalid_escape_kept(self):
        self.assertEqual(percent_decode("100%"), "100%")
        self.assertEqual(percent_decode("%zz"), "%zz")

    def test_multibyte_sequence(self):
        self.assertEqual(percent_decode("%E2%82%AC5"), "€5")


class BuildTests(unittest.TestCase):
    def test_build_from_mapping(self):
        self.assertEqual(build_query({"q": "fish & chips", "page": 2}), "q=fish+%26+chips&page=2")

    def test_build_skips_none_and_expands_lists(self):
        self.assertEqual(build_query({"t": ["a", "b"], "x": None}), "t=a&t=b")

    def test_roundtrip_simple(self):
        params = {"name": "Zoë Smith", "tags": ["red", "blue"]}
        self.assertEqual(parse_qs(build_query(params)), {"name": ["Zoë Smith"], "tags": ["red", "blue"]})


if __name__ == "__main__":
    unittest.main()
