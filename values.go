// SPDX-License-Identifier: Apache-2.0

package trawl

import "github.com/trawl-dev/trawl/call"

// Call is one traced call, decoded: its task, times, arguments and
// return value. It is call.Call, of package call, the data model;
// package render writes calls out.
type Call = call.Call

// Value is a decoded argument, return value, struct member or array
// element; its Kind says which of its fields hold it. It is call.Value.
type Value = call.Value

// Kind says what a Value holds: call.KindInt, call.KindString and so
// on (see call.Kind).
type Kind = call.Kind

// FunctionStats are one function's figures, counted in the kernel by a
// session with Config.Aggregate; render.Stats shows them. It is
// call.FunctionStats.
type FunctionStats = call.FunctionStats

// StackCount is how many calls of a function ended under one pair of
// stacks, counted in the kernel by a session with Config.Aggregate and
// Config.Stack or UserStack; render.Folded writes them as a flame graph.
// It is call.StackCount.
type StackCount = call.StackCount
