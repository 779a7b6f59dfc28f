// SPDX-License-Identifier: Apache-2.0

package main

import (
	"errors"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/trawl-dev/trawl/internal/vmtest/guest"
)

// TestReadmeQuestions checks that every command of the README's table of
// questions is one trawl accepts: its flags exist, their values parse,
// and the checks that need no kernel (flags that go together, the output
// file, the configuration) pass. It also checks that the table and the
// man page's EXAMPLES hold the same commands.
func TestReadmeQuestions(t *testing.T) {
	guest.HostOnly(t)
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(readme), "<!-- questions:begin -->\n")
	table, _, ok2 := strings.Cut(table, "<!-- questions:end -->")
	if !ok || !ok2 {
		t.Fatal("README.md has no table between <!-- questions:begin --> and <!-- questions:end -->")
	}
	var commands []string
	for _, row := range strings.Split(strings.TrimSpace(table), "\n")[2:] {
		cells := splitRow(row)
		if len(cells) != 3 || !strings.HasPrefix(cells[1], "`trawl ") || !strings.HasSuffix(cells[1], "`") {
			t.Errorf("row %q: want a question, a `trawl ...` command and what it prints", row)
			continue
		}
		commands = append(commands, strings.Trim(cells[1], "`"))
	}
	var examples []string
	for _, e := range manExamples {
		examples = append(examples, e.command)
	}
	if !slices.Equal(commands, examples) {
		t.Errorf("the README's questions run\n%s\nthe man page's EXAMPLES (manExamples)\n%s",
			strings.Join(commands, "\n"), strings.Join(examples, "\n"))
	}
	t.Chdir(t.TempDir()) // the files -o names are checked, not written
	for _, command := range commands {
		t.Run(command, func(t *testing.T) {
			args, err := shellWords(command)
			if err != nil {
				t.Fatal(err)
			}
			if err := checkCommandLine(args[1:]); err != nil {
				t.Error(err)
			}
		})
	}
}

// checkCommandLine parses trawl's arguments as the command line does and
// runs every check that needs no kernel, without tracing.
func checkCommandLine(args []string) error {
	if len(args) > 0 && args[0] == "report" {
		cmd := newReportCommand()
		if err := cmd.ParseFlags(args[1:]); err != nil {
			return err
		}
		format, _ := cmd.Flags().GetString("format")
		output, _ := cmd.Flags().GetString("output")
		return reportFlags{format: format, output: output}.validate(cmd.Flags().Args())
	}
	f := &traceFlags{}
	cmd := &cobra.Command{Use: "trawl"}
	f.register(cmd)
	if err := cmd.ParseFlags(args); err != nil {
		return err
	}
	rest := cmd.Flags().Args()
	patterns, command := rest, []string(nil)
	if dash := cmd.Flags().ArgsLenAtDash(); dash >= 0 {
		patterns, command = rest[:dash], rest[dash:]
	}
	f.set = map[string]bool{}
	cmd.Flags().Visit(func(fl *pflag.Flag) { f.set[fl.Name] = true })
	if err := f.validate(command); err != nil {
		return err
	}
	if len(f.entries) == 0 {
		if err := checkExclusions(patterns); err != nil {
			return err
		}
	}
	return f.config(patterns).Validate()
}

// splitRow splits a Markdown table row into its cells, keeping \| in them
// as |.
func splitRow(row string) []string {
	row = strings.TrimSpace(row)
	row = strings.TrimSuffix(strings.TrimPrefix(row, "|"), "|")
	var cells []string
	var cell strings.Builder
	for i := 0; i < len(row); i++ {
		switch {
		case row[i] == '\\' && i+1 < len(row) && row[i+1] == '|':
			cell.WriteByte('|')
			i++
		case row[i] == '|':
			cells = append(cells, strings.TrimSpace(cell.String()))
			cell.Reset()
		default:
			cell.WriteByte(row[i])
		}
	}
	return append(cells, strings.TrimSpace(cell.String()))
}

var errUnterminated = errors.New("a quote is not closed")

// shellWords splits a command as a POSIX shell would, for the quoting the
// README uses: single and double quotes, no expansions.
func shellWords(s string) ([]string, error) {
	var words []string
	var word strings.Builder
	inWord := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\'' || c == '"':
			j := strings.IndexByte(s[i+1:], c)
			if j < 0 {
				return nil, errUnterminated
			}
			word.WriteString(s[i+1 : i+1+j])
			i += j + 1
			inWord = true
		case c == ' ':
			if inWord {
				words = append(words, word.String())
				word.Reset()
				inWord = false
			}
		default:
			word.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		words = append(words, word.String())
	}
	return words, nil
}
