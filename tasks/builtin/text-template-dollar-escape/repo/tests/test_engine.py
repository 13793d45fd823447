import unittest
from types import SimpleNamespace

from tinytpl import Template, TemplateError, render


class RenderTests(unittest.TestCase):
    def test_simple_and_braced(self):
        self.assertEqual(render("Hello $name!", name="Ann"), "Hello Ann!")
        self.assertEqual(render("${n}th", n=4), "4th")

    def test_context_and_keywords(self):
        self.assertEqual(render("$a-$b", {"a": 1, "b": 2}, b=3), "1-3")

    def test_dotted_lookup(self):
        user = SimpleNamespace(email="ann@example.com", team={"name": "core"})
        self.assertEqual(render("${user.email} (${user.team.name})", user=user), "ann@example.com (core)")

    def test_filters(self):
        self.assertEqual(render("${name|strip|upper}", name="  ann "), "ANN")
        self.assertEqual(render("${items|len}", items=[1, 2, 3]), "3")

    def test_default(self):
        self.assertEqual(render("${city:-unknown}"), "unknown")
        self.assertEqual(render("${city:-unknown}", city="Oslo"), "Oslo")
        self.assertEqual(render("${city:-unknown}", city=None), "unknown")

    def test_lone_dollar_is_literal(self):
        self.assertEqual(render("costs 5$ or $ 6"), "costs 5$ or $ 6")
        self.assertEqual(render("$"), "$")


class ErrorTests(unittest.TestCase):
    def test_missing_value(self):
        with self.assertRaises(TemplateError):
            render("$missing")

    def test_syntax_errors(self):
        for text in ("${open", "${}", "${a b}", "${a|nope}", "${1abc}"):
            with self.subTest(text=text), self.assertRaises(TemplateError):
                Template(text)


class NamesTests(unittest.TestCase):
    def test_names_in_order(self):
        self.assertEqual(Template("$b ${a.x} $b ${c|upper}").names, ["b", "a", "c"])


if __name__ == "__main__":
    unittest.main()
