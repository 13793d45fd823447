"""ringbuf: a fixed-capacity FIFO that overwrites its oldest items when full."""

from .buffer import RingBuffer

__all__ = ["RingBuffer"]
