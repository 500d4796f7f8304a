//! The orders GNU libstdc++'s `std::priority_queue` (a binary heap on a
//! vector) and `std::sort` (introsort) leave equal elements in.
//!
//! Some TensorFlow kernels rank candidates by score alone, so which of two
//! tied candidates comes first is decided by the standard library's
//! algorithms, not by the kernel. TensorFlow's Linux builds use libstdc++;
//! these are its documented algorithms (heap with a hole moved down to a
//! leaf, then sifted up; introsort with median-of-three pivots, a heapsort
//! fallback and a final insertion sort over runs of 16), replayed step for
//! step so ties come out in the same order.

/// A max-heap ordered by `less`, as `std::priority_queue<T, std::vector<T>,
/// decltype(less)>`.
pub(super) struct PriorityQueue<T, F: Fn(&T, &T) -> bool> {
    items: Vec<T>,
    less: F,
}

impl<T: Copy, F: Fn(&T, &T) -> bool> PriorityQueue<T, F> {
    pub(super) fn new(less: F) -> Self {
        PriorityQueue {
            items: Vec::new(),
            less,
        }
    }

    pub(super) fn push(&mut self, value: T) {
        self.items.push(value);
        let hole = self.items.len() - 1;
        push_heap(&mut self.items, hole, 0, value, &self.less);
    }

    pub(super) fn pop(&mut self) -> Option<T> {
        let len = self.items.len();
        if len == 0 {
            return None;
        }
        let top = self.items[0];
        if len > 1 {
            let last = self.items[len - 1];
            self.items[len - 1] = top;
            adjust_heap(&mut self.items[..len - 1], 0, last, &self.less);
        }
        self.items.pop();
        Some(top)
    }
}

/// Sifts `value` up from `hole` towards `top` (`std::__push_heap`).
fn push_heap<T: Copy>(
    v: &mut [T],
    mut hole: usize,
    top: usize,
    value: T,
    less: &impl Fn(&T, &T) -> bool,
) {
    while hole > top {
        let parent = (hole - 1) / 2;
        if !less(&v[parent], &value) {
            break;
        }
        v[hole] = v[parent];
        hole = parent;
    }
    v[hole] = value;
}

/// Moves the hole at `hole` down to a leaf along the larger children, then
/// sifts `value` up from there (`std::__adjust_heap`).
fn adjust_heap<T: Copy>(v: &mut [T], mut hole: usize, value: T, less: &impl Fn(&T, &T) -> bool) {
    let len = v.len();
    let top = hole;
    let mut child = hole;
    while len >= 1 && child < (len - 1) / 2 {
        child = 2 * (child + 1);
        if less(&v[child], &v[child - 1]) {
            child -= 1;
        }
        v[hole] = v[child];
        hole = child;
    }
    if len >= 2 && len.is_multiple_of(2) && child == (len - 2) / 2 {
        child = 2 * (child + 1);
        v[hole] = v[child - 1];
        hole = child - 1;
    }
    push_heap(v, hole, top, value, less);
}

/// `std::sort(v.begin(), v.end(), less)`.
pub(super) fn sort<T: Copy>(v: &mut [T], less: &impl Fn(&T, &T) -> bool) {
    if v.len() < 2 {
        return;
    }
    let depth = 2 * (usize::BITS - 1 - v.len().leading_zeros()) as usize;
    introsort_loop(v, depth, less);
    final_insertion_sort(v, less);
}

const THRESHOLD: usize = 16;

fn introsort_loop<T: Copy>(mut v: &mut [T], mut depth: usize, less: &impl Fn(&T, &T) -> bool) {
    while v.len() > THRESHOLD {
        if depth == 0 {
            heap_sort(v, less);
            return;
        }
        depth -= 1;
        let cut = partition_pivot(v, less);
        let (low, high) = v.split_at_mut(cut);
        introsort_loop(high, depth, less);
        v = low;
    }
}

/// Median of three moved to the front, then Hoare partition
/// (`std::__unguarded_partition_pivot`); returns the cut.
fn partition_pivot<T: Copy>(v: &mut [T], less: &impl Fn(&T, &T) -> bool) -> usize {
    let len = v.len();
    let (a, b, c) = (1, len / 2, len - 1);
    let pick = if less(&v[a], &v[b]) {
        if less(&v[b], &v[c]) {
            b
        } else if less(&v[a], &v[c]) {
            c
        } else {
            a
        }
    } else if less(&v[a], &v[c]) {
        a
    } else if less(&v[b], &v[c]) {
        c
    } else {
        b
    };
    v.swap(0, pick);
    let (mut first, mut last) = (1, len);
    loop {
        // The pivot at 0 bounds both scans (libstdc++'s unguarded loops).
        while less(&v[first], &v[0]) {
            first += 1;
        }
        last -= 1;
        while less(&v[0], &v[last]) {
            last -= 1;
        }
        if first >= last {
            return first;
        }
        v.swap(first, last);
        first += 1;
    }
}

/// `std::__partial_sort(first, last, last)`: make a heap, then pop it.
fn heap_sort<T: Copy>(v: &mut [T], less: &impl Fn(&T, &T) -> bool) {
    let len = v.len();
    if len >= 2 {
        let mut parent = (len - 2) / 2;
        loop {
            let value = v[parent];
            adjust_heap(v, parent, value, less);
            if parent == 0 {
                break;
            }
            parent -= 1;
        }
    }
    let mut end = len;
    while end > 1 {
        end -= 1;
        let value = v[end];
        v[end] = v[0];
        adjust_heap(&mut v[..end], 0, value, less);
    }
}

fn final_insertion_sort<T: Copy>(v: &mut [T], less: &impl Fn(&T, &T) -> bool) {
    let split = v.len().min(THRESHOLD);
    insertion_sort(&mut v[..split], less);
    for i in split..v.len() {
        linear_insert(v, i, less);
    }
}

fn insertion_sort<T: Copy>(v: &mut [T], less: &impl Fn(&T, &T) -> bool) {
    for i in 1..v.len() {
        if less(&v[i], &v[0]) {
            let value = v[i];
            v.copy_within(0..i, 1);
            v[0] = value;
        } else {
            linear_insert(v, i, less);
        }
    }
}

/// Moves `v[i]` left past the larger elements before it; an element not
/// above it is known to be there (`std::__unguarded_linear_insert`).
fn linear_insert<T: Copy>(v: &mut [T], mut i: usize, less: &impl Fn(&T, &T) -> bool) {
    let value = v[i];
    while i > 0 && less(&value, &v[i - 1]) {
        v[i] = v[i - 1];
        i -= 1;
    }
    v[i] = value;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sort_orders_and_heap_pops_largest_first() {
        let mut v: Vec<u32> = (0..200).map(|i| (i * 7919) % 101).collect();
        sort(&mut v, &|a, b| a < b);
        assert!(v.windows(2).all(|w| w[0] <= w[1]));
        let mut q = PriorityQueue::new(|a: &u32, b: &u32| a < b);
        for x in [5, 1, 9, 3, 9, 0, 7] {
            q.push(x);
        }
        let popped: Vec<u32> = std::iter::from_fn(|| q.pop()).collect();
        assert_eq!(popped, [9, 9, 7, 5, 3, 1, 0]);
    }
}
