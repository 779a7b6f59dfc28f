// SPDX-License-Identifier: Apache-2.0

package measure

import (
	"context"
	"errors"
	"math"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestMedianMinMax(t *testing.T) {
	for _, c := range []struct {
		s                Samples
		median, min, max float64
	}{
		{Samples{7}, 7, 7, 7},
		{Samples{3, 1, 2}, 2, 1, 3},
		{Samples{10, 1, 4, 2}, 3, 1, 10},
		{Samples{5, 5, 1, 9, 5}, 5, 1, 9},
	} {
		before := slices.Clone(c.s)
		if got := c.s.Median(); got != c.median {
			t.Errorf("%v.Median() = %v, want %v", c.s, got, c.median)
		}
		if got := c.s.Min(); got != c.min {
			t.Errorf("%v.Min() = %v, want %v", c.s, got, c.min)
		}
		if got := c.s.Max(); got != c.max {
			t.Errorf("%v.Max() = %v, want %v", c.s, got, c.max)
		}
		if !slices.Equal(c.s, before) {
			t.Errorf("the samples changed to %v", c.s)
		}
	}
	var none Samples
	if !math.IsNaN(none.Median()) || !math.IsNaN(none.Min()) || !math.IsNaN(none.Max()) {
		t.Errorf("no samples: median %v, min %v, max %v, want NaN", none.Median(), none.Min(), none.Max())
	}
}

func TestOver(t *testing.T) {
	// Round by round: (x - base) / (ref - base).
	x, base, ref := Samples{130, 250, 100}, Samples{100, 200, 50}, Samples{120, 300, 75}
	want := Samples{1.5, 0.5, 2}
	if got := Over(x, base, ref); !slices.Equal(got, want) {
		t.Errorf("Over = %v, want %v", got, want)
	}
	// The median of the ratios, not the ratio of the medians.
	if got := Over(x, base, ref).Median(); got != 1.5 {
		t.Errorf("median ratio %v, want 1.5", got)
	}
}

func TestFormat(t *testing.T) {
	for _, c := range []struct{ got, want string }{
		{Ns(1234.5), "1234"},
		{Ns(1235.5), "1236"},
		{Times(1.234), "1.23"},
		{Times(2), "2.00"},
		{Range(Samples{1.5, 0.25, 3.125}), "0.25-3.12"},
	} {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
}

func TestTable(t *testing.T) {
	var b strings.Builder
	tab := NewTable(&b, "backend", "ns", "ratio")
	tab.Row("fentry", "12", "1.50")
	tab.Row("kprobe", "error: no")
	tab.Row("x", "", "2.00")
	tab.End()
	want := "| backend | ns | ratio |\n|---|---|---|\n| fentry | 12 | 1.50 |\n| kprobe | error: no | |\n| x | | 2.00 |\n\n"
	if b.String() != want {
		t.Errorf("table:\n%s\nwant:\n%s", b.String(), want)
	}
}

func TestTurns(t *testing.T) {
	var order []string
	measure := func(name string, fail int) func(int) (int, error) {
		return func(k int) (int, error) {
			order = append(order, name)
			if k == fail {
				return 0, errors.New("broke")
			}
			return 10 * k, nil
		}
	}
	runs, err := Turns(t.Context(), 3, []func(int) (int, error){measure("a", -1), measure("b", 1)})
	if err != nil {
		t.Fatal(err)
	}
	// One of each per round; b is not run again once it failed.
	if want := []string{"a", "b", "a", "b", "a"}; !slices.Equal(order, want) {
		t.Errorf("ran %v, want %v", order, want)
	}
	if !slices.Equal(runs[0].Results, []int{0, 10, 20}) || runs[0].Err != nil {
		t.Errorf("a: %v", runs[0])
	}
	if !slices.Equal(runs[1].Results, []int{0}) || runs[1].Err == nil {
		t.Errorf("b: %v", runs[1])
	}

	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := Turns(ctx, 1, []func(int) (int, error){measure("a", -1)}); !errors.Is(err, context.Canceled) {
		t.Errorf("Turns with a cancelled context: %v", err)
	}
}

func TestFastest(t *testing.T) {
	type run struct {
		id   int
		took time.Duration
	}
	got := Fastest([]run{{1, 3 * time.Second}, {2, time.Second}, {3, time.Second}, {4, 2 * time.Second}}, func(r run) time.Duration { return r.took })
	if got.id != 2 {
		t.Errorf("fastest is run %d, want 2 (the first of the fastest)", got.id)
	}
}

func TestCollect(t *testing.T) {
	type round struct{ base, x float64 }
	got := Collect([]round{{1, 2}, {3, 4}}, func(r round) float64 { return r.x })
	if !slices.Equal(got, Samples{2, 4}) {
		t.Errorf("Collect = %v", got)
	}
}
