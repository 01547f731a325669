"""Vidur keeps entity and event id counters on classes: reset them so each episode starts at id 0."""

from __future__ import annotations

def reset_vidur_ids() -> None:
    """Reset Vidur's class-level id counters so a new cluster gets replica ids 0..n-1 again."""
    from vidur.entities.base_entity import BaseEntity
    from vidur.events.base_event import BaseEvent

    stack = [BaseEntity]
    while stack:
        cls = stack.pop()
        if "_id" in cls.__dict__:
            cls._id = -1
        stack.extend(cls.__subclasses__())
    stack = [BaseEvent]
    while stack:
        cls = stack.pop()
        if "_id" in cls.__dict__:
            cls._id = 0
        stack.extend(cls.__subclasses__())
