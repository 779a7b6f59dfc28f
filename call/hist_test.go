// SPDX-License-Identifier: Apache-2.0

package call

import "testing"

func TestHistogramQuantiles(t *testing.T) {
	var h Histogram
	for v := uint64(1); v <= 100000; v++ {
		h.Record(v)
	}
	for _, q := range []float64{0.5, 0.9, 0.99} {
		exact := q * 100000
		got := float64(h.Quantile(q))
		if got < exact || got > exact*1.125 {
			t.Errorf("p%v = %v, want within 12.5%% above %v", q*100, got, exact)
		}
	}
	if h.Max() != 100000 || h.Quantile(1) != 100000 {
		t.Errorf("max %d, p100 %d", h.Max(), h.Quantile(1))
	}
	for _, v := range []uint64{0, 15, 16, 17, 1 << 40, ^uint64(0)} {
		lo, hi := bucketRange(bucket(v))
		if v < lo || v > hi {
			t.Errorf("%d falls in bucket [%d, %d]", v, lo, hi)
		}
	}
}
