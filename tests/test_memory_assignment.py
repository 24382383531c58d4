"""Arena assignment: the checker, greedy-by-size, shared objects and the exact solver, against
hand-computed layouts and brute-force references written here."""
import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hybrid.graph.memory import (AssignmentError, Buffer, arena_size, check_assignment, exact, greedy_by_size,
                                 live_bytes, shared_objects)


# -- references -----------------------------------------------------------------------------
def conflicts(buffers, offsets):
    """Every pair live at a common step whose byte ranges intersect (plain pairwise test)."""
    found = []
    for i, j in itertools.combinations(range(len(buffers)), 2):
        a, b = buffers[i], buffers[j]
        if not a.size or not b.size:
            continue
        same_time = any(a.start <= t <= a.end and b.start <= t <= b.end for t in range(max(a.end, b.end) + 1))
        same_bytes = any(offsets[i] <= x < offsets[i] + a.size for x in range(offsets[j], offsets[j] + b.size))
        if same_time and same_bytes:
            found.append((i, j))
    return found


def peak(buffers):
    """Max over steps of the bytes live, by summing at every step."""
    last = max((b.end for b in buffers), default=-1)
    return max((sum(b.size for b in buffers if b.start <= t <= b.end) for t in range(last + 1)), default=0)


def brute_force_arena(buffers):
    """The smallest arena, by trying every integer offset for every buffer, arena size by arena size."""
    arena = peak(buffers)
    while True:
        offsets = [0] * len(buffers)

        def place(i):
            if i == len(buffers):
                return True
            for offset in range(arena - buffers[i].size + 1):
                offsets[i] = offset
                if not conflicts(buffers[:i + 1], offsets[:i + 1]) and place(i + 1):
                    return True
            return False

        if place(0):
            return arena
        arena += 1


buffer_lists = st.lists(st.tuples(st.integers(0, 64), st.integers(0, 12), st.integers(0, 6)),
                        max_size=30).map(lambda items: [Buffer(s, t, t + d) for s, t, d in items])
tiny_lists = st.lists(st.tuples(st.integers(1, 4), st.integers(0, 4), st.integers(0, 3)),
                      min_size=1, max_size=5).map(lambda items: [Buffer(s, t, t + d) for s, t, d in items])


# -- the checker --------------------------------------------------------------------------------
def test_checker_accepts_sharing_in_time_or_address_and_rejects_overlap():
    check_assignment([Buffer(4, 0, 1), Buffer(4, 2, 3)], [0, 0])  # same bytes, disjoint steps
    check_assignment([Buffer(4, 0, 3), Buffer(4, 1, 2)], [0, 4])  # same steps, adjacent bytes
    check_assignment([Buffer(0, 0, 3), Buffer(4, 0, 3)], [0, 0])  # zero-size buffers take nothing
    with pytest.raises(AssignmentError, match="live together at step 1"):
        check_assignment([Buffer(4, 0, 1), Buffer(4, 1, 2)], [0, 3])
    with pytest.raises(AssignmentError, match="negative offset"):
        check_assignment([Buffer(4, 0, 1)], [-1])
    with pytest.raises(AssignmentError, match="2 offsets for 1 buffers"):
        check_assignment([Buffer(4, 0, 1)], [0, 0])


@settings(max_examples=150, deadline=None)
@given(buffer_lists, st.data())
def test_checker_agrees_with_pairwise_reference_on_random_offsets(buffers, data):
    offsets = data.draw(st.lists(st.integers(0, 96), min_size=len(buffers), max_size=len(buffers)))
    if conflicts(buffers, offsets):
        with pytest.raises(AssignmentError):
            check_assignment(buffers, offsets)
    else:
        check_assignment(buffers, offsets)


# -- heuristics -----------------------------------------------------------------------------------
@settings(max_examples=150, deadline=None)
@given(buffer_lists)
def test_heuristics_give_valid_layouts_no_smaller_than_the_bound(buffers):
    bound = peak(buffers)
    assert max(live_bytes(buffers), default=0) == bound
    for strategy in (greedy_by_size, shared_objects):
        result = strategy(buffers)
        assert conflicts(buffers, result.offsets) == []
        check_assignment(buffers, result.offsets)
        assert result.arena >= arena_size(buffers, result.offsets) and result.arena >= bound
    assert greedy_by_size(buffers).arena == arena_size(buffers, greedy_by_size(buffers).offsets)


def test_greedy_by_size_hand_computed_layout():
    # placed largest first: 8 at 0; the 4 at steps 1-3 overlaps it and goes on top (8); the 4 at
    # steps 3-5 fits the gap below that one (0); the 2 spans everything and goes on top (12).
    buffers = [Buffer(8, 0, 2), Buffer(4, 1, 3), Buffer(4, 3, 5), Buffer(2, 0, 5)]
    result = greedy_by_size(buffers)
    assert result.offsets == [0, 8, 0, 12]
    assert result.arena == 14 == peak(buffers)


def test_greedy_by_size_picks_the_best_fitting_gap():
    # placed by size: 5 at 0; 4 (steps 1-2) above it at 5; 3 (steps 2-3) at 9; 2 (steps 1-2) at 12.
    # The 1-byte buffer (steps 0-1) sees the 4 at 5-9 and the 2 at 12-14: gaps of 5 bytes (0-5) and
    # 3 bytes (9-12); best fit takes the smaller one at 9, not the lowest at 0
    buffers = [Buffer(1, 0, 1), Buffer(3, 2, 3), Buffer(4, 1, 2), Buffer(2, 1, 2), Buffer(5, 2, 2)]
    result = greedy_by_size(buffers)
    assert result.offsets == [9, 9, 5, 12, 0] and result.arena == 14 == peak(buffers)


def test_greedy_by_size_places_longer_lived_buffers_first_among_equal_sizes():
    # the 2 at steps 0-1 goes first, at 0, and the 2 at step 0 above it; the 2 at steps 3-4 at 0;
    # the 1 at steps 1-4 then fits at 2: 4 bytes, the bound. Taking equal sizes by start instead
    # puts the step-1 buffer at 2 and leaves the 1-byte buffer nothing below 4 (5 bytes).
    buffers = [Buffer(2, 0, 0), Buffer(2, 0, 1), Buffer(2, 3, 4), Buffer(1, 1, 4)]
    result = greedy_by_size(buffers)
    assert result.offsets == [2, 0, 0, 2] and result.arena == 4 == peak(buffers)


def test_greedy_by_size_retries_by_start_when_it_misses_the_bound():
    # a chain of 1-byte buffers, each overlapping the next: longest-first puts the long one (steps
    # 3-5) at 0 and ends with three levels; by start they alternate between two (the bound)
    buffers = [Buffer(1, 1, 2), Buffer(1, 3, 5), Buffer(1, 0, 1), Buffer(1, 2, 3)]
    result = greedy_by_size(buffers)
    assert result.offsets == [1, 1, 0, 0] and result.arena == 2 == peak(buffers)


def test_shared_objects_hand_computed_and_worse_than_greedy():
    # the 4-byte object freed at step 2 is reused by the first 2-byte buffer; the second needs a new
    # object: 4 + 2 = 6 bytes, where offsets can pack both 2-byte buffers into the 4 freed bytes
    buffers = [Buffer(4, 0, 1), Buffer(2, 2, 3), Buffer(2, 2, 3)]
    pooled = shared_objects(buffers)
    assert pooled.offsets == [0, 0, 4] and pooled.arena == 6
    assert greedy_by_size(buffers).arena == 4 == peak(buffers)


def test_shared_objects_grows_the_largest_free_object():
    buffers = [Buffer(2, 0, 0), Buffer(3, 0, 0), Buffer(5, 1, 1)]
    pooled = shared_objects(buffers)
    assert pooled.offsets == [0, 2, 2] and pooled.arena == 2 + 5  # the 3-byte object grew to 5


# -- exact ------------------------------------------------------------------------------------------
def test_exact_beats_greedy_where_greedy_is_suboptimal():
    # greedy: the 3 at 0, the long 2 above it at 3, one step-2 buffer under it at 0 and the other on
    # top at 5 (7 bytes); the long 2 at 4 leaves 0-4 for the two step-2 buffers (6 bytes, the bound)
    buffers = [Buffer(2, 2, 2), Buffer(2, 2, 2), Buffer(2, 0, 4), Buffer(3, 3, 3)]
    greedy, best = greedy_by_size(buffers), exact(buffers)
    assert greedy.offsets == [0, 5, 3, 0] and greedy.arena == 7
    assert best.arena == 6 == brute_force_arena(buffers) == peak(buffers)
    check_assignment(buffers, best.offsets)
    assert arena_size(buffers, best.offsets) == 6


@pytest.mark.parametrize("buffers", [
    [Buffer(8, 0, 2), Buffer(4, 1, 3), Buffer(4, 3, 5), Buffer(2, 0, 5)],
    [Buffer(3, 0, 4), Buffer(2, 1, 2), Buffer(2, 3, 4), Buffer(1, 0, 0), Buffer(4, 5, 6)],
    [Buffer(2, 0, 1), Buffer(2, 1, 2), Buffer(2, 2, 3), Buffer(2, 3, 4)],  # a chain: two slots
])
def test_greedy_by_size_is_optimal_on_chosen_cases(buffers):
    assert greedy_by_size(buffers).arena == exact(buffers).arena == brute_force_arena(buffers)


@settings(max_examples=60, deadline=None)
@given(tiny_lists)
def test_exact_equals_brute_force_and_never_loses_to_greedy(buffers):
    best = exact(buffers)
    assert conflicts(buffers, best.offsets) == []
    assert best.arena == arena_size(buffers, best.offsets) == brute_force_arena(buffers)
    assert best.arena <= greedy_by_size(buffers).arena


def test_exact_searches_twenty_buffers_and_refuses_more():
    buffers = [Buffer(16 * (1 + (7 * i) % 5), i % 7, i % 7 + 1 + i % 3) for i in range(20)]
    buffers[0] = Buffer(1, 0, 9)  # keeps greedy off the bound so the search runs
    assert greedy_by_size(buffers).arena > peak(buffers)
    best = exact(buffers)
    check_assignment(buffers, best.offsets)
    assert best.arena == arena_size(buffers, best.offsets) == peak(buffers)  # the bound: optimal
    with pytest.raises(ValueError, match="more than max_buffers=10"):
        exact(buffers, max_buffers=10)
