// SPDX-License-Identifier: Apache-2.0

package kernel

import "testing"

// TestHold checks that holders share a catalogue, that it is read again
// when the modules change and that the last release drops it.
func TestHold(t *testing.T) {
	loads, mods := 0, "a 1\n"
	h := &holder{
		load:    func(*Cache) (*Catalogue, error) { loads++; return &Catalogue{}, nil },
		modules: func() string { return mods },
	}
	first, release1, err := h.hold(nil)
	if err != nil {
		t.Fatal(err)
	}
	second, release2, _ := h.hold(nil)
	if second != first || loads != 1 {
		t.Errorf("two holders: %d loads, same catalogue %v", loads, second == first)
	}
	mods = "a 1\nb 2\n"
	third, release3, _ := h.hold(nil)
	if third == first || loads != 2 {
		t.Errorf("after a module loaded: %d loads, same catalogue %v", loads, third == first)
	}
	release3()
	if h.cur != nil {
		t.Error("the newest catalogue is kept after its last holder released it")
	}
	release1()
	release1() // counts once
	if _, release, _ := h.hold(nil); loads != 3 {
		t.Errorf("held again after release: %d loads, want 3", loads)
	} else {
		release()
	}
	release2()
	if h.cur != nil {
		t.Error("a catalogue is kept with no holder")
	}
}

// TestHoldNames checks that a catalogue of names is loaded apart while no
// catalogue is held, and that the shared one serves when it is.
func TestHoldNames(t *testing.T) {
	loads, named := 0, 0
	h := &holder{
		load:      func(*Cache) (*Catalogue, error) { loads++; return &Catalogue{}, nil },
		loadNames: func([]string, *Cache) (*Catalogue, error) { named++; return &Catalogue{}, nil },
		modules:   func() string { return "" },
	}
	part, release, err := h.holdNames([]string{"f"}, nil)
	if err != nil || named != 1 || loads != 0 || h.cur != nil {
		t.Fatalf("nothing held: %d named loads, %d loads, shared %v, %v", named, loads, h.cur != nil, err)
	}
	release()
	full, releaseFull, _ := h.hold(nil)
	got, release, _ := h.holdNames([]string{"f"}, nil)
	if got != full || named != 1 || part == full {
		t.Errorf("with the catalogue held: got it %v, %d named loads", got == full, named)
	}
	release()
	releaseFull()
	if h.cur != nil {
		t.Error("a catalogue is kept with no holder")
	}
}
