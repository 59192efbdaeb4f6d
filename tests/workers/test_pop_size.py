"""The worker's pop size follows the last batch's pace (WorkerConfig.batch_budget_s)."""

from __future__ import annotations

from distsched.workers.schedule_one import WorkerConfig, next_pop_size

CONFIG = WorkerConfig(batch=256, batch_budget_s=0.25)


def test_fast_full_batches_keep_the_configured_size() -> None:
    assert next_pop_size(CONFIG, popped=256, current=256, elapsed_s=0.03) == 256


def test_a_slow_batch_shrinks_the_next_pop_to_the_budget() -> None:
    # 256 preemptions at 60 ms each: about four fit in 250 ms.
    assert next_pop_size(CONFIG, popped=256, current=256, elapsed_s=256 * 0.06) == 4
    # Slower than the whole budget for one pod: still one at a time, never zero.
    assert next_pop_size(CONFIG, popped=3, current=3, elapsed_s=1.5) == 1


def test_the_size_grows_back_at_most_twofold_per_batch() -> None:
    sizes = [1]
    while sizes[-1] < 256:
        sizes.append(next_pop_size(CONFIG, popped=sizes[-1], current=sizes[-1], elapsed_s=1e-4))
    assert sizes == [1, 2, 4, 8, 16, 32, 64, 128, 256]


def test_a_short_queue_says_nothing_about_the_pace() -> None:
    # Two pods popped of four asked for, quickly: the size stays.
    assert next_pop_size(CONFIG, popped=2, current=4, elapsed_s=0.001) == 4
    # ... but a short batch that was slow still shrinks it.
    assert next_pop_size(CONFIG, popped=2, current=64, elapsed_s=0.5) == 1
