import unittest

from prioq import PriorityQueue


class BasicTests(unittest.TestCase):
    def test_pop_in_priority_order(self):
        q = PriorityQueue([("c", 3), ("a", 1), ("d", 4), ("b", 2)])
        self.assertEqual([q.pop() for _ in range(4)], ["a", "b", "c", "d"])
        self.assertFalse(q)

    def test_fifo_among_equal_priorities(self):
        q = PriorityQueue()
        for name in "xyzw":
            q.push(name, 5)
        q.push("first", 1)
        self.assertEqual([q.pop() for _ in range(5)], ["first", "x", "y", "z", "w"])

    def test_peek_and_contains(self):
        q = PriorityQueue([("a", 2), ("b", 1)])
        self.assertEqual(q.peek(), ("b", 1))
        self.assertIn("a", q)
        self.assertNotIn("z", q)
        self.assertEqual(len(q), 2)

    def test_empty_errors(self):
        q = PriorityQueue()
        with self.assertRaises(IndexError):
            q.pop()
        with self.assertRaises(IndexError):
            q.peek()

    def test_iteration_is_a_sorted_snapshot(self):
        q = PriorityQueue([("b", 2), ("a", 1), ("c", 3)])
        self.assertEqual(list(q), ["a", "b", "c"])
        self.assertEqual(len(q), 3)


class ChangeTests(unittest.TestCase):
    def test_update_to_lower_urgency(self):
        q = PriorityQueue([("a", 1), ("b", 2), ("c", 3)])
        q.update("a", 10)
        self.assertEqual(q.priority("a"), 10)
        self.assertEqual([q.pop() for _ in range(3)], ["b", "c", "a"])

    def test_push_existing_item_updates(self):
        q = PriorityQueue([("a", 1), ("b", 2)])
        q.push("a", 5)
        self.assertEqual(len(q), 2)
        self.assertEqual(q.pop_with_priority(), ("b", 2))

    def test_remove_returns_priority(self):
        q = PriorityQueue([("a", 1), ("b", 2), ("c", 3)])
        self.assertEqual(q.remove("b"), 2)
        self.assertNotIn("b", q)
        self.assertEqual([q.pop() for _ in range(2)], ["a", "c"])
        with self.assertRaises(KeyError):
            q.remove("b")

    def test_remove_last_entry(self):
        q = PriorityQueue([("a", 1), ("b", 2)])
        q.remove("b")
        self.assertEqual(q.peek(), ("a", 1))


if __name__ == "__main__":
    unittest.main()
