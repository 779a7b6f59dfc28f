// SPDX-License-Identifier: Apache-2.0

// Package selector turns the user's patterns into an exact set of kernel
// functions.
//
// A pattern is
//
//		[!][MODULE:]NAME[(TYPE, ...)]
//
//	  - NAME is a glob ("tcp_*", "vfs_?ead", "[a-c]*", as path.Match) or a
//	    regular expression between slashes ("/^vfs_(read|write)$/", RE2
//	    syntax, unanchored). An empty NAME before "(" means "*".
//	  - MODULE: limits the pattern to a module, itself a glob; "vmlinux:"
//	    means the core kernel. Without it, vmlinux and modules match.
//	  - (TYPE, ...) keeps functions that take an argument of each listed C
//	    type, in any position: "*(struct sk_buff *)" is every function taking
//	    a socket buffer, "tcp_*(struct sock *, int)" the tcp_ functions that
//	    take both. Types compare as written by trawl list, ignoring const,
//	    volatile and spacing.
//	  - A leading "!" excludes what the rest matches.
//
// A pattern of tracepoints is
//
//	[!]tp:SUBSYSTEM[:EVENT][(TYPE, ...)]
//
// with SUBSYSTEM and EVENT globs ("tp:sched:*", "tp:skb:kfree_skb",
// "tp:*"); without EVENT it is every event of the subsystem. It selects
// the kernel's BTF-typed tracepoints (see kernel.Catalogue.Tracepoints),
// and the types, if any, are those of the tracepoint's arguments.
// Function and tracepoint patterns mix freely; exclusions only take
// away what patterns of their own kind include.
//
// Several patterns combine: the result is every function an including
// pattern matches, minus those an excluding pattern matches. Only
// exclusions means "everything except". An including pattern that selects
// nothing is an error naming it. Functions that cannot be traced, and
// those on the deny list (see Denied), are never selected; they are
// reported as excluded with the reason.
package selector

import (
	"cmp"
	"errors"
	"fmt"
	"path"
	"regexp"
	"regexp/syntax"
	"strings"

	"github.com/trawl-dev/trawl/internal/kernel"
)

// Errors of selection, for errors.Is.
var (
	ErrBadPattern = errors.New("bad pattern")
	ErrNoMatch    = errors.New("pattern selects no traceable function")
)

// NoMatchError reports an including pattern that selects nothing. It
// matches ErrNoMatch with errors.Is.
type NoMatchError struct {
	Pattern string
	// Matched counts the functions the pattern matched, all excluded.
	Matched int
	// Example is one excluded function and its reason.
	Example string
	// Suggestions are the traceable functions nearest to a name that
	// matched no function (see Suggest).
	Suggestions []string
}

func (e *NoMatchError) Error() string {
	what := "function"
	if strings.HasPrefix(strings.TrimPrefix(e.Pattern, "!"), kernel.TracepointPrefix) {
		what = "BTF-typed tracepoint"
	}
	if e.Matched > 0 {
		return fmt.Sprintf("pattern %q matches %d %ss but none can be traced (%s)", e.Pattern, e.Matched, what, e.Example)
	}
	msg := fmt.Sprintf("pattern %q matches no %s", e.Pattern, what)
	if n := len(e.Suggestions); n > 0 {
		msg += "; did you mean " + strings.Join(e.Suggestions[:n-1], ", ")
		if n > 1 {
			msg += " or "
		}
		msg += e.Suggestions[n-1] + "?"
	}
	return msg
}

// Is makes errors.Is(err, ErrNoMatch) true.
func (e *NoMatchError) Is(target error) bool { return target == ErrNoMatch }

// Pattern is one parsed pattern.
type Pattern struct {
	Text     string   // as the user wrote it
	Exclude  bool     // leading "!"
	Module   string   // module glob, "" for any
	ArgTypes []string // normalised C types the function must take
	// Tracepoint says the pattern selects tracepoints ("tp:"); Module is
	// then the subsystem glob.
	Tracepoint bool
	glob       string
	re         *regexp.Regexp
}

// Parse parses one pattern.
func Parse(text string) (*Pattern, error) {
	p := &Pattern{Text: text}
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w %q: %s", ErrBadPattern, text, fmt.Sprintf(format, args...))
	}
	s := text
	if rest, ok := strings.CutPrefix(s, "!"); ok {
		p.Exclude, s = true, rest
	}
	if rest, ok := strings.CutPrefix(s, kernel.TracepointPrefix); ok {
		return p.parseTracepoint(rest, bad)
	}
	if i := strings.IndexAny(s, ":/("); i >= 0 && s[i] == ':' {
		p.Module, s = s[:i], s[i+1:]
		if p.Module == "" {
			return nil, bad("empty module before ':'")
		}
		if _, err := path.Match(p.Module, ""); err != nil {
			return nil, bad("module glob %q is malformed", p.Module)
		}
	}
	name, types, err := splitTypes(s)
	if err != nil {
		return nil, bad("%v", err)
	}
	p.ArgTypes = types
	if re, ok := strings.CutPrefix(name, "/"); ok {
		re, ok = strings.CutSuffix(re, "/")
		if !ok {
			return nil, bad("regular expression lacks its closing '/'")
		}
		offset := len(text) - len(s) + 1 // where the expression starts in text
		if p.re, err = compile(re, offset); err != nil {
			return nil, bad("%v", err)
		}
		return p, nil
	}
	if name == "" {
		if types == nil {
			return nil, bad("empty function name")
		}
		name = "*"
	}
	if strings.ContainsAny(name, " \t,()/") {
		return nil, bad("a function name cannot contain spaces, commas, parentheses or '/'")
	}
	if _, err := path.Match(name, ""); err != nil {
		return nil, bad("glob %q is malformed (unclosed '[' or trailing '\\')", name)
	}
	p.glob = name
	return p, nil
}

// parseTracepoint parses what follows "tp:" in a tracepoint pattern:
// SUBSYSTEM[:EVENT][(TYPE, ...)], both globs.
func (p *Pattern) parseTracepoint(s string, bad func(string, ...any) error) (*Pattern, error) {
	p.Tracepoint = true
	names, types, err := splitTypes(s)
	if err != nil {
		return nil, bad("%v", err)
	}
	p.ArgTypes = types
	sub, event, found := strings.Cut(names, ":")
	if !found {
		event = "*"
	}
	for _, glob := range []string{sub, event} {
		if glob == "" {
			return nil, bad("a tracepoint pattern is tp:SUBSYSTEM:EVENT, each a glob, like tp:sched:sched_process_*")
		}
		if strings.ContainsAny(glob, " \t,()/:") {
			return nil, bad("a tracepoint's subsystem or event cannot contain spaces, commas, parentheses, '/' or ':'")
		}
		if _, err := path.Match(glob, ""); err != nil {
			return nil, bad("glob %q is malformed (unclosed '[' or trailing '\\')", glob)
		}
	}
	p.Module, p.glob = sub, event
	return p, nil
}

// LiteralNames returns the function names the patterns select from, when
// each pattern that selects names its functions in full: a name without
// glob characters ("vfs_read", "ext4:ext4_sync_file", "tcp_sendmsg(struct
// sock *)"), or a regular expression of whole names ("/^(vfs_read|vfs_write)$/").
// Exclusions are left out: they only take away. ok is false when some
// pattern can match names it does not spell out, selects tracepoints, or
// is bad.
func LiteralNames(patterns []string) (names []string, ok bool) {
	for _, text := range patterns {
		p, err := Parse(text)
		if err != nil {
			return nil, false
		}
		if p.Tracepoint {
			// Their arguments' names are in functions no name gives.
			return nil, false
		}
		if p.Exclude {
			continue
		}
		some, ok := p.literalNames()
		if !ok {
			return nil, false
		}
		names = append(names, some...)
	}
	return names, len(names) > 0
}

// literalNames returns the names p matches when it spells them all out.
func (p *Pattern) literalNames() ([]string, bool) {
	if p.re == nil {
		return []string{p.glob}, isName(p.glob)
	}
	expr := p.re.String()
	inner, ok := strings.CutPrefix(expr, "^")
	if inner, ok = strings.CutSuffix(inner, "$"); !ok {
		return nil, false
	}
	group, grouped := strings.CutPrefix(inner, "(?:")
	if !grouped {
		group, grouped = strings.CutPrefix(inner, "(")
	}
	if grouped {
		if inner, ok = strings.CutSuffix(group, ")"); !ok {
			return nil, false
		}
	}
	names := strings.Split(inner, "|")
	for _, n := range names {
		if !isName(n) {
			return nil, false
		}
	}
	return names, true
}

// isName says whether s is a C identifier (or a part of one), a function
// named in full rather than a glob or a regular expression.
func isName(s string) bool {
	return s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9')
	}) < 0
}

// suggest returns the names to suggest for p, a function named in full
// that matched nothing, from the kernel's traceable functions: the
// nearest names (see Suggest), with p's module if it names one. A glob, a
// regular expression or a pattern with argument types gets none.
func (p *Pattern) suggest(traceable []kernel.Symbol) []string {
	if p.re != nil || len(p.ArgTypes) > 0 || !isName(p.glob) {
		return nil
	}
	var names []string
	for _, sym := range traceable {
		if p.matchModule(sym.Module) {
			names = append(names, sym.Name)
		}
	}
	out := Suggest(p.glob, names)
	if p.Module != "" {
		for i := range out {
			out[i] = p.Module + ":" + out[i]
		}
	}
	return out
}

// splitTypes splits "name(type, type)" into the name and the normalised
// types. A regular expression's slashes are skipped, so "/f(o)/" is a name.
func splitTypes(s string) (string, []string, error) {
	end := 0
	if strings.HasPrefix(s, "/") {
		end = max(1, strings.LastIndexByte(s, '/'))
	}
	open := strings.IndexByte(s[end:], '(')
	if open < 0 {
		if strings.Contains(s[end:], ")") {
			return "", nil, errors.New("')' without '('")
		}
		return s, nil, nil
	}
	name, list := s[:end+open], s[end+open+1:]
	inner, ok := strings.CutSuffix(list, ")")
	if !ok || strings.ContainsAny(inner, "()") {
		return "", nil, errors.New("argument types must be one list in parentheses at the end, like tcp_*(struct sock *, int)")
	}
	var types []string
	for _, t := range strings.Split(inner, ",") {
		t = NormalizeType(t)
		if t == "" {
			return "", nil, errors.New("empty argument type in parentheses")
		}
		types = append(types, t)
	}
	return name, types, nil
}

// compile compiles a regular expression, reporting where a syntax error is
// in the whole pattern (1-based column).
func compile(expr string, offset int) (*regexp.Regexp, error) {
	re, err := regexp.Compile(expr)
	var serr *syntax.Error
	if errors.As(err, &serr) {
		col := offset + 1
		if i := strings.Index(expr, serr.Expr); i >= 0 {
			col += i
		}
		return nil, fmt.Errorf("regular expression error at column %d: %s: %q", col, serr.Code, serr.Expr)
	}
	return re, err
}

// NormalizeType writes a C type the way patterns compare them: no const,
// volatile or restrict, single spaces, and "*" attached as trawl list
// prints it ("struct sk_buff *").
func NormalizeType(t string) string {
	t = strings.ReplaceAll(t, "*", " * ")
	var words []string
	for _, w := range strings.Fields(t) {
		switch w {
		case "const", "volatile", "restrict", "__restrict":
			continue
		}
		words = append(words, w)
	}
	return strings.ReplaceAll(strings.Join(words, " "), "* *", "**")
}

// matchName reports whether the function name matches.
func (p *Pattern) matchName(name string) bool {
	if p.re != nil {
		return p.re.MatchString(name)
	}
	ok, _ := path.Match(p.glob, name) // the glob was checked by Parse
	return ok
}

// Match reports whether fn, a function or a tracepoint, matches the
// pattern, ignoring Exclude.
func (p *Pattern) Match(fn *kernel.Function) bool {
	if p.Tracepoint != fn.IsTracepoint() {
		return false
	}
	if p.Tracepoint {
		sub, _ := path.Match(p.Module, fn.Subsystem)
		event, _ := path.Match(p.glob, fn.Event)
		return sub && event && p.matchTypes(fn)
	}
	return p.matchModule(fn.Module) && p.matchName(fn.Name) && p.matchTypes(fn)
}

// matchModule reports whether a function of module ("" for vmlinux)
// matches the pattern's module, if it names one.
func (p *Pattern) matchModule(module string) bool {
	if p.Module == "" {
		return true
	}
	ok, _ := path.Match(p.Module, cmp.Or(module, "vmlinux")) // the glob was checked by Parse
	return ok
}

func (p *Pattern) matchTypes(fn *kernel.Function) bool {
	if len(p.ArgTypes) == 0 {
		return true
	}
	proto := fn.Proto()
	if proto == nil {
		return false
	}
	args := kernel.ParamTypes(proto)
	for _, want := range p.ArgTypes {
		found := false
		for _, t := range args {
			if NormalizeType(t) == want {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}
