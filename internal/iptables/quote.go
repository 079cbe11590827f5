package iptables

import "strings"

// SaveString quotes s as iptables-save prints a string argument such as a comment
// (xtables_save_string): bare when it is made of [A-Za-z0-9_-] only, otherwise in
// double quotes, with a backslash before every double quote, backslash and single
// quote. iptables-restore reads both forms. Rules rendered with it read back from
// iptables-save byte for byte, so "-D" with the same text matches.
func SaveString(s string) string {
	if isPlainWord(s) {
		return s
	}
	return quoted(s)
}

func isPlainWord(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if !(r == '-' || r == '_' || (r >= '0' && r <= '9') || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z')) {
			return false
		}
	}
	return true
}

// quoted wraps s in double quotes, escaping the double quote, the backslash and
// the single quote with a backslash. It works on bytes, as xtables_save_string
// does, so text that is not UTF-8 is kept as it is.
func quoted(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for i := range len(s) {
		c := s[i]
		if c == '"' || c == '\\' || c == '\'' {
			b.WriteByte('\\')
		}
		b.WriteByte(c)
	}
	b.WriteByte('"')
	return b.String()
}
