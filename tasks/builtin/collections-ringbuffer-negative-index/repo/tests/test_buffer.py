import unittest

from ringbuf import RingBuffer


class AppendTests(unittest.TestCase):
    def test_fill_and_overwrite(self):
        buf = RingBuffer(3)
        self.assertIsNone(buf.append(1))
        buf.extend([2, 3])
        self.assertTrue(buf.is_full())
        self.assertEqual(buf.append(4), 1)
        self.assertEqual(list(buf), [2, 3, 4])

    def test_capacity_validation(self):
        with self.assertRaises(ValueError):
            RingBuffer(0)

    def test_repr(self):
        self.assertEqual(repr(RingBuffer(2, "abc")), "RingBuffer(2, ['b', 'c'])")


class IndexTests(unittest.TestCase):
    def test_positive_index_after_wrap(self):
        buf = RingBuffer(4, range(10))
        self.assertEqual([buf[i] for i in range(4)], [6, 7, 8, 9])
        with self.assertRaises(IndexError):
            buf[4]

    def test_negative_index_when_full(self):
        buf = RingBuffer(3, "abcde")
        self.assertEqual((buf[-1], buf[-3]), ("e", "c"))
        with self.assertRaises(IndexError):
            buf[-4]

    def test_slices(self):
        buf = RingBuffer(5, range(7))
        self.assertEqual(buf[1:4], [3, 4, 5])
        self.assertEqual(buf[::-1], [6, 5, 4, 3, 2])

    def test_setitem(self):
        buf = RingBuffer(2, [1, 2, 3])
        buf[0] = 20
        self.assertEqual(list(buf), [20, 3])


class PopTests(unittest.TestCase):
    def test_popleft_and_pop(self):
        buf = RingBuffer(3, [1, 2, 3, 4])
        self.assertEqual(buf.popleft(), 2)
        self.assertEqual(buf.pop(), 4)
        self.assertEqual(list(buf), [3])
        buf.extend([5, 6, 7])
        self.assertEqual(list(buf), [5, 6, 7])

    def test_pop_empty(self):
        with self.assertRaises(IndexError):
            RingBuffer(2).popleft()
        with self.assertRaises(IndexError):
            RingBuffer(2).pop()

    def test_clear(self):
        buf = RingBuffer(2, [1, 2])
        buf.clear()
        self.assertEqual((len(buf), list(buf)), (0, []))


class ConvenienceTests(unittest.TestCase):
    def test_window_mean(self):
        buf = RingBuffer(3, [10, 20, 30, 40])
        self.assertEqual(buf.window_mean(), 30)

    def test_oldest_and_newest_on_empty(self):
        buf = RingBuffer(3)
        self.assertIsNone(buf.oldest())
        self.assertEqual(buf.newest("none"), "none")


if __name__ == "__main__":
    unittest.main()
