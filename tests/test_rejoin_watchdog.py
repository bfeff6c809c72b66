"""The rejoin watchdog: armed by a loss, disarmed by an assignment, due once per period without one."""

from __future__ import annotations

import pytest

from replicator.flow.control.rejoin import RejoinWatchdog


def test_nothing_is_due_without_a_loss():
    dog = RejoinWatchdog(30.0)
    assert not dog.armed
    assert not dog.due(1_000.0)


def test_an_assignment_after_a_loss_disarms_it():
    dog = RejoinWatchdog(30.0)
    dog.lost(100.0)
    assert dog.armed and not dog.due(129.9)
    dog.assigned()
    assert not dog.armed and not dog.due(500.0)
    assert dog.rejoins == 0


def test_a_loss_without_assignment_is_due_once_per_period():
    dog = RejoinWatchdog(30.0)
    dog.lost(100.0)
    dog.lost(120.0)  # a second loss report does not push the deadline back
    assert dog.due(130.0)
    assert not dog.due(130.5)  # re-armed from the rejoin
    assert not dog.due(159.9)
    assert dog.due(160.0)
    assert dog.rejoins == 2
    dog.assigned()
    assert not dog.due(1_000.0)


def test_a_period_must_be_positive():
    with pytest.raises(ValueError, match="after_s must be positive"):
        RejoinWatchdog(0)
