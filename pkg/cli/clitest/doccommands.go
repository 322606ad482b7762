// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package clitest

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// DocCommand is one command line for one of the project's binaries, as a
// user would copy it from a fenced shell block of README.md or docs/.
type DocCommand struct {
	// Where is file:line of the command's first line.
	Where string
	// Args are the shell words after the binary's name, quotes removed
	// and a leading ~/ expanded to home.
	Args []string
}

// shellFences are the info strings of the fenced blocks a user copies into
// a shell; other blocks (output, YAML, unlabelled) are not commands.
var shellFences = []string{"sh", "bash", "shell", "console"}

// CheckDocCommands runs accept on every command line for binary in the
// repository's README.md and docs/*.md (see ParseDocCommands), one subtest
// each, and fails the subtest when accept refuses the flags. It fails when
// there is none: a binary checked this way is one the docs show.
func CheckDocCommands(t *testing.T, binary string, accept func(args []string) error) {
	t.Helper()
	cmds := DocCommands(t, binary)
	if len(cmds) == 0 {
		t.Fatalf("no command line for %s in a fenced shell block of README.md or docs/*.md", binary)
	}
	for _, c := range cmds {
		t.Run(c.Where, func(t *testing.T) {
			if err := accept(c.Args); err != nil {
				t.Errorf("%s: %s %s: the flags are refused: %v", c.Where, binary, strings.Join(c.Args, " "), err)
			}
		})
	}
}

// DocCommands returns the command lines for binary in the repository's
// README.md and docs/*.md (the repository root is the nearest directory
// above the working directory holding go.mod).
func DocCommands(t *testing.T, binary string) []DocCommand {
	t.Helper()
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	files = append([]string{filepath.Join(root, "README.md")}, files...)
	home, err := os.UserHomeDir()
	if err != nil {
		t.Fatalf("home directory for ~: %v", err)
	}
	var cmds []DocCommand
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, f)
		cmds = append(cmds, ParseDocCommands(string(b), rel, binary, home)...)
	}
	return cmds
}

// RepoRoot is the nearest directory above the working directory that holds
// go.mod.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod above the working directory")
		}
		dir = parent
	}
}

// ParseDocCommands returns the command lines for binary in markdown's
// fenced shell blocks: a command is a line (with its backslash
// continuations) or a part of one between ;, &&, || and |, whose first
// word, after any VAR=value, is the binary: binary, bin/binary,
// ./bin/binary, go run ./cmd/binary, or for kubectl-NAME also kubectl NAME.
// A console block's lines count only after a "$ " prompt. file names the
// page in each command's Where; a leading ~/ in a word becomes home/.
func ParseDocCommands(markdown, file, binary, home string) []DocCommand {
	var cmds []DocCommand
	lines := strings.Split(markdown, "\n")
	fence := ""
	for i := 0; i < len(lines); i++ {
		trimmed := strings.TrimSpace(lines[i])
		if strings.HasPrefix(trimmed, "```") {
			if fence == "" {
				fence = strings.TrimSpace(strings.TrimPrefix(trimmed, "```"))
				if fence == "" {
					fence = "text"
				}
			} else {
				fence = ""
			}
			continue
		}
		if !slices.Contains(shellFences, fence) {
			continue
		}
		first := i
		line := trimmed
		for strings.HasSuffix(line, "\\") && i+1 < len(lines) {
			i++
			line = strings.TrimSuffix(line, "\\") + " " + strings.TrimSpace(lines[i])
		}
		if fence == "console" {
			rest, ok := strings.CutPrefix(line, "$ ")
			if !ok {
				continue
			}
			line = rest
		}
		for _, words := range shellCommands(line, home) {
			if args, ok := argsOf(words, binary); ok {
				cmds = append(cmds, DocCommand{Where: fmt.Sprintf("%s:%d", file, first+1), Args: args})
			}
		}
	}
	return cmds
}

// argsOf returns the words after binary's name when words run binary.
func argsOf(words []string, binary string) ([]string, bool) {
	for len(words) > 0 && isAssignment(words[0]) {
		words = words[1:]
	}
	switch {
	case len(words) == 0:
		return nil, false
	case words[0] == binary || words[0] == "bin/"+binary || words[0] == "./bin/"+binary:
		return words[1:], true
	case len(words) >= 3 && words[0] == "go" && words[1] == "run" && strings.TrimPrefix(words[2], "./") == "cmd/"+binary:
		return words[3:], true
	case len(words) >= 2 && words[0] == "kubectl" && "kubectl-"+words[1] == binary:
		return words[2:], true
	}
	return nil, false
}

// isAssignment says whether word is a shell variable assignment, VAR=value.
func isAssignment(word string) bool {
	name, _, ok := strings.Cut(word, "=")
	if !ok || name == "" {
		return false
	}
	for i, r := range name {
		if r != '_' && (r < 'A' || r > 'Z') && (r < 'a' || r > 'z') && (i == 0 || r < '0' || r > '9') {
			return false
		}
	}
	return true
}

// shellCommands splits a shell line into its commands' words: quotes are
// removed, an unquoted ~/ that starts a word is home/, a # that starts a
// word begins a comment, and ;, &, | (and &&,
// ||) end a command. Expansions ($VAR, $(...)) are kept as written.
func shellCommands(line, home string) [][]string {
	var cmds [][]string
	var words []string
	var word strings.Builder
	inWord := false
	endWord := func() {
		if inWord {
			words = append(words, word.String())
		}
		word.Reset()
		inWord = false
	}
	endCommand := func() {
		endWord()
		if len(words) > 0 {
			cmds = append(cmds, words)
		}
		words = nil
	}
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case c == '\'' || c == '"':
			end := strings.IndexByte(line[i+1:], c)
			if end < 0 {
				end = len(line) - i - 1
			}
			word.WriteString(line[i+1 : i+1+end])
			inWord = true
			i += end + 1
		case c == '\\' && i+1 < len(line):
			word.WriteByte(line[i+1])
			inWord = true
			i++
		case c == ' ' || c == '\t':
			endWord()
		case c == ';' || c == '&' || c == '|':
			endCommand()
		case c == '#' && !inWord:
			endCommand()
			return cmds
		case c == '~' && !inWord && strings.HasPrefix(line[i+1:], "/"):
			word.WriteString(home)
			inWord = true
		default:
			word.WriteByte(c)
			inWord = true
		}
	}
	endCommand()
	return cmds
}
