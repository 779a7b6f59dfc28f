// SPDX-License-Identifier: Apache-2.0

package call

import "math/bits"

// Histogram is a log-linear latency histogram: exact below 16 ns, then 8
// buckets per power of two, so a percentile is off by at most 12.5%.
// Recording is a few instructions; memory grows with the largest value.
type Histogram struct {
	counts []uint64
	total  uint64
	max    uint64
}

// The layout of the buckets, which the kernel's --stats histograms share
// (capture.h, enum hist_layout): values below HistogramExact are their own
// bucket, then 1 << HistogramSubBits buckets per power of two.
const (
	HistogramExact   = 16
	HistogramSubBits = 3
)

const subBits = HistogramSubBits // 8 buckets per power of two

// bucket returns the bucket index of v.
func bucket(v uint64) int {
	if v < 16 {
		return int(v)
	}
	e := bits.Len64(v) - 1 // 4..63
	sub := int(v>>(e-subBits)) & (1<<subBits - 1)
	return 16 + (e-4)<<subBits + sub
}

// bucketRange returns the smallest and largest values of bucket i.
func bucketRange(i int) (lo, hi uint64) {
	if i < 16 {
		return uint64(i), uint64(i)
	}
	e := (i-16)>>subBits + 4
	sub := uint64((i - 16) & (1<<subBits - 1))
	lo = (1<<subBits + sub) << (e - subBits)
	return lo, lo + 1<<(e-subBits) - 1
}

// NewHistogram returns the histogram of counts, the number of values in
// each bucket in order (see HistogramExact), whose largest value is max.
func NewHistogram(counts []uint64, max uint64) Histogram {
	h := Histogram{max: max}
	last := -1
	for i, n := range counts {
		h.total += n
		if n > 0 {
			last = i
		}
	}
	h.counts = append([]uint64(nil), counts[:last+1]...)
	return h
}

// Record adds one value.
func (h *Histogram) Record(v uint64) {
	i := bucket(v)
	if i >= len(h.counts) {
		h.counts = append(h.counts, make([]uint64, i+1-len(h.counts))...)
	}
	h.counts[i]++
	h.total++
	h.max = max(h.max, v)
}

// Count returns the number of values recorded.
func (h *Histogram) Count() uint64 { return h.total }

// Max returns the largest value recorded.
func (h *Histogram) Max() uint64 { return h.max }

// Quantile returns the value at or below which a fraction q of the values
// lie: the upper bound of its bucket, never above Max.
func (h *Histogram) Quantile(q float64) uint64 {
	if h.total == 0 {
		return 0
	}
	rank := uint64(q*float64(h.total) + 0.5)
	rank = min(max(rank, 1), h.total)
	var seen uint64
	for i, n := range h.counts {
		seen += n
		if seen >= rank {
			_, hi := bucketRange(i)
			return min(hi, h.max)
		}
	}
	return h.max
}

// Bucket is one bucket of a Histogram: Count values from Lo to Hi, both
// included.
type Bucket struct{ Lo, Hi, Count uint64 }

// Buckets returns the histogram's non-empty buckets, in ascending order.
func (h *Histogram) Buckets() []Bucket {
	var out []Bucket
	for i, n := range h.counts {
		if n > 0 {
			lo, hi := bucketRange(i)
			out = append(out, Bucket{lo, hi, n})
		}
	}
	return out
}

// Merge adds the values of o.
func (h *Histogram) Merge(o Histogram) {
	if len(o.counts) > len(h.counts) {
		h.counts = append(h.counts, make([]uint64, len(o.counts)-len(h.counts))...)
	}
	for i, n := range o.counts {
		h.counts[i] += n
	}
	h.total += o.total
	h.max = max(h.max, o.max)
}
