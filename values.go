// SPDX-License-Identifier: Apache-2.0

package trawl

import "github.com/trawl-dev/trawl/render"

// Call is one traced call, decoded: its task, times, arguments and
// return value. Package render writes calls out.
type Call = render.Call

// Value is a decoded argument, return value, struct member or array
// element; its Kind says which of its fields hold it.
type Value = render.Value

// Kind says what a Value holds: render.KindInt, render.KindString and so
// on (see render.Kind).
type Kind = render.Kind

// FunctionStats are one function's figures, counted in the kernel by a
// session with Config.Aggregate; render.Stats shows them.
type FunctionStats = render.FunctionStats
