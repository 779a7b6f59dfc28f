// SPDX-License-Identifier: Apache-2.0

package render

import (
	"unicode"
	"unicode/utf8"
)

// Every name and string that comes from the traced system (task names,
// function and module names, symbols, stack frames, enumerators, member
// names) goes through appendEscaped before it reaches text, tree or stats
// output, as ps escapes a task's name: a task can name itself anything
// (prctl PR_SET_NAME), and an escape sequence in its name must not reach
// the terminal reading trawl's output. Printable ASCII and printable
// UTF-8 are written as they are; a backslash is written \\; every other
// byte, control characters (ESC, BEL, newline, tab), DEL, the C1 controls
// (U+0080 to U+009F, such as CSI) and bytes that are not valid UTF-8, is
// written \xHH, a byte at a time. Strings are quoted with strconv's Go
// syntax, which escapes the same way. JSON escapes by its own rules.

// appendEscaped appends s to b, escaped as described above.
func appendEscaped(b []byte, s string) []byte {
	if plain(s) {
		return append(b, s...)
	}
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == '\\':
			b = append(b, `\\`...)
			i++
			continue
		case c >= 0x20 && c < 0x7f:
			b = append(b, c)
			i++
			continue
		case c >= utf8.RuneSelf:
			r, n := utf8.DecodeRuneInString(s[i:])
			if (r != utf8.RuneError || n > 1) && unicode.IsPrint(r) {
				b = append(b, s[i:i+n]...)
				i += n
				continue
			}
			for _, c := range []byte(s[i : i+n]) {
				b = append(b, '\\', 'x', hexDigits[c>>4], hexDigits[c&15])
			}
			i += n
			continue
		}
		b = append(b, '\\', 'x', hexDigits[c>>4], hexDigits[c&15])
		i++
	}
	return b
}

// Escape returns s escaped as the text output escapes what comes from the
// traced system (see appendEscaped): s itself when nothing needs escaping.
func Escape(s string) string {
	if plain(s) {
		return s
	}
	return string(appendEscaped(nil, s))
}

// plain says whether s is printable ASCII without a backslash, written as
// it is.
func plain(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '\\' {
			return false
		}
	}
	return true
}
