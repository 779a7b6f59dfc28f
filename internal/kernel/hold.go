// SPDX-License-Identifier: Apache-2.0

package kernel

import (
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"
)

// holder shares a catalogue among those holding it.
type holder struct {
	mu sync.Mutex
	// load reads the catalogue, loadNames one of some functions (see
	// LoadNames), both through cache unless it is nil; modules lists the
	// kernel's modules.
	load      func(cache *Cache) (*Catalogue, error)
	loadNames func(names []string, cache *Cache) (*Catalogue, error)
	modules   func() string
	// cur is the catalogue handed out, nil when nobody holds it.
	cur *held
}

// held is one catalogue read, the modules it was read with and how many
// hold it.
type held struct {
	cat     *Catalogue
	modules string
	holders int
}

// live holds the running kernel's catalogue.
var live = &holder{load: loadLive, loadNames: loadLiveNames, modules: liveModules}

// liveRoot is the running system's files, whose vmlinux BTF the process's
// BTF cache decodes (see loadBTF).
var liveRoot = os.DirFS("/")

// loadLive loads the running kernel's catalogue, through cache unless it
// is nil (its time is logged for trawl --debug).
func loadLive(cache *Cache) (*Catalogue, error) {
	if cache == nil {
		return timedLoad(func() (*Catalogue, error) { return Load(liveFS()) })
	}
	return timedLoad(func() (*Catalogue, error) { return cache.Load(liveFS()) })
}

// loadLiveNames loads the running kernel's catalogue of names.
func loadLiveNames(names []string, cache *Cache) (*Catalogue, error) {
	if cache == nil {
		return timedLoad(func() (*Catalogue, error) { return LoadNames(liveFS(), names) })
	}
	return timedLoad(func() (*Catalogue, error) { return cache.LoadNames(liveFS(), names) })
}

// liveModules is what the live catalogue is read again after a change
// of: the kernel's modules, and where its BTF comes from (UseBTF).
func liveModules() string { return loadedModules() + BTFOrigin() }

func timedLoad(load func() (*Catalogue, error)) (*Catalogue, error) {
	start := time.Now()
	c, err := load()
	if err == nil {
		slog.Debug("catalogue loaded", "functions", len(c.funcs), "modules", len(c.specs), "took", time.Since(start).Round(time.Millisecond))
	}
	return c, err
}

// Hold returns the catalogue of the running kernel and the function that
// releases it. Those holding it at once share one catalogue, read again
// when the kernel's modules changed since it was read (so modules loaded
// later are seen), and dropped when the last holder releases it. It is
// read through cache unless cache is nil; releasing it waits for the
// cache's write (see Catalogue.WriteCache).
func Hold(cache *Cache) (*Catalogue, func(), error) { return live.hold(cache) }

// HoldNames returns a catalogue that has the functions called names, and
// the function that releases it: the shared catalogue when it is held
// already, else a catalogue of only those functions (LoadNames), faster to
// load, which is not shared. cache is as for Hold.
func HoldNames(names []string, cache *Cache) (*Catalogue, func(), error) {
	return live.holdNames(names, cache)
}

func (h *holder) holdNames(names []string, cache *Cache) (*Catalogue, func(), error) {
	mods := h.modules()
	h.mu.Lock()
	shared := h.cur != nil && h.cur.modules == mods
	h.mu.Unlock()
	if shared {
		return h.hold(cache)
	}
	cat, err := h.loadNames(names, cache)
	if err != nil {
		return nil, nil, err
	}
	return cat, sync.OnceFunc(cat.waitCache), nil
}

func (h *holder) hold(cache *Cache) (*Catalogue, func(), error) {
	mods := h.modules()
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.cur == nil || h.cur.modules != mods {
		cat, err := h.load(cache)
		if err != nil {
			return nil, nil, err
		}
		h.cur = &held{cat: cat, modules: mods}
	}
	cur := h.cur
	cur.holders++
	var once sync.Once
	release := func() {
		once.Do(func() {
			h.mu.Lock()
			if cur.holders--; cur.holders == 0 && h.cur == cur {
				h.cur = nil
			}
			h.mu.Unlock()
			cur.cat.waitCache()
		})
	}
	return cur.cat, release, nil
}

// loadedModules lists the kernel's modules by name and size, one a line;
// "" when /proc/modules cannot be read (a kernel without modules).
func loadedModules() string {
	b, err := os.ReadFile("/proc/modules")
	if err != nil {
		return ""
	}
	var out strings.Builder
	for line := range strings.Lines(string(b)) {
		if f := strings.Fields(line); len(f) >= 2 {
			out.WriteString(f[0] + " " + f[1] + "\n")
		}
	}
	return out.String()
}
