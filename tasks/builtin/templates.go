package builtin

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
)

// val is a test value: int, []int, string or bool.
type val any

func pyLit(v val) string {
	switch x := v.(type) {
	case int:
		return strconv.Itoa(x)
	case bool:
		if x {
			return "True"
		}
		return "False"
	case string:
		return strconv.Quote(x)
	case []int:
		return "[" + joinInts(x) + "]"
	}
	panic(fmt.Sprintf("builtin: value %T", v))
}

func goLit(v val) string {
	switch x := v.(type) {
	case int:
		return strconv.Itoa(x)
	case bool:
		return strconv.FormatBool(x)
	case string:
		return strconv.Quote(x)
	case []int:
		return "[]int{" + joinInts(x) + "}"
	}
	panic(fmt.Sprintf("builtin: value %T", v))
}

// joinInts is xs in decimal, separated by ", ": a list literal's inside
// in Python and Go alike.
func joinInts(xs []int) string {
	parts := make([]string, len(xs))
	for i, e := range xs {
		parts[i] = strconv.Itoa(e)
	}
	return strings.Join(parts, ", ")
}

func args(lit func(val) string, vs []val) string {
	parts := make([]string, len(vs))
	for i, v := range vs {
		parts[i] = lit(v)
	}
	return strings.Join(parts, ", ")
}

// tcase is one call and the value the correct code returns.
type tcase struct {
	args []val
	want val
}

// fn is one function of a generated module: its source in both languages
// (with {f}/{F} for its name and any extra placeholders already filled) and
// cases. A buggy function also has the buggy sources and evaluators.
type fn struct {
	py, goSrc    string // correct
	pyBug, goBug string // buggy ("" for a correct filler)
	pyPre, goPre string // module-level code the function needs (constants, helpers)
	pyPreBug     string // pre code in the buggy version, when the bug is there
	goPreBug     string
	goImports    []string
	cases        []tcase
	visibleOK    []tcase // cases the buggy code gets right (shown as PASS_TO_PASS tests)
	statement    string  // {f} is the function's name; {call} a failing call, {want} its value
	name         string  // snake_case
}

// template makes one bug of a family. Its name is unique within the
// family; family/name is the instance's Template.
type template struct {
	family, name string
	gen          func(r *rand.Rand, name string) fn
}

func randList(r *rand.Rand, n, lo, hi int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = lo + r.IntN(hi-lo+1)
	}
	return out
}

func sum(xs []int) int {
	s := 0
	for _, x := range xs {
		s += x
	}
	return s
}

// Families. The first five train (with held-out instances); the last two
// are held out whole.
var templates = []template{
	// wrong_operator
	{"wrong_operator", "sum", func(r *rand.Rand, name string) fn {
		var cs []tcase
		for range 3 {
			l := randList(r, 2+r.IntN(3), 1, 20)
			cs = append(cs, tcase{[]val{l}, sum(l)})
		}
		return fn{name: name,
			py:    "def {f}(values):\n    total = 0\n    for v in values:\n        total += v\n    return total\n",
			pyBug: "def {f}(values):\n    total = 0\n    for v in values:\n        total -= v\n    return total\n",
			goSrc: "func {F}(values []int) int {\n\ttotal := 0\n\tfor _, v := range values {\n\t\ttotal += v\n\t}\n\treturn total\n}\n",
			goBug: "func {F}(values []int) int {\n\ttotal := 0\n\tfor _, v := range values {\n\t\ttotal -= v\n\t}\n\treturn total\n}\n",
			cases: cs, visibleOK: []tcase{{[]val{[]int{}}, 0}},
			statement: "`{f}` should return the sum of the numbers it is given, but `{call}` does not return {want}.",
		}
	}},
	{"wrong_operator", "threshold", func(r *rand.Rand, name string) fn {
		t := 10 + r.IntN(80)
		src := func(op string) (string, string) {
			return "def {f}(score):\n    return score " + op + " " + strconv.Itoa(t) + "\n",
				"func {F}(score int) bool {\n\treturn score " + op + " " + strconv.Itoa(t) + "\n}\n"
		}
		p, g := src(">=")
		pb, gb := src(">")
		return fn{name: name, py: p, goSrc: g, pyBug: pb, goBug: gb,
			cases:     []tcase{{[]val{t}, true}, {[]val{t + 1 + r.IntN(5)}, true}, {[]val{t - 1 - r.IntN(5)}, false}},
			visibleOK: []tcase{{[]val{t + 7}, true}},
			statement: fmt.Sprintf("`{f}(score)` should report whether a score reaches the threshold of %d (the threshold itself counts), but `{call}` does not return {want}.", t),
		}
	}},
	// off_by_one
	{"off_by_one", "triangle", func(r *rand.Rand, name string) fn {
		var cs []tcase
		for _, n := range []int{1 + r.IntN(4), 5 + r.IntN(10), 20 + r.IntN(30)} {
			cs = append(cs, tcase{[]val{n}, n * (n + 1) / 2})
		}
		return fn{name: name,
			py:    "def {f}(n):\n    total = 0\n    for i in range(1, n + 1):\n        total += i\n    return total\n",
			pyBug: "def {f}(n):\n    total = 0\n    for i in range(1, n):\n        total += i\n    return total\n",
			goSrc: "func {F}(n int) int {\n\ttotal := 0\n\tfor i := 1; i <= n; i++ {\n\t\ttotal += i\n\t}\n\treturn total\n}\n",
			goBug: "func {F}(n int) int {\n\ttotal := 0\n\tfor i := 1; i < n; i++ {\n\t\ttotal += i\n\t}\n\treturn total\n}\n",
			cases: cs, visibleOK: []tcase{{[]val{0}, 0}},
			statement: "`{f}(n)` should return 1 + 2 + ... + n, but `{call}` does not return {want}.",
		}
	}},
	{"off_by_one", "between", func(r *rand.Rand, name string) fn {
		lo := 1 + r.IntN(10)
		hi := lo + 3 + r.IntN(10)
		count := func(xs []int) int {
			c := 0
			for _, x := range xs {
				if lo <= x && x <= hi {
					c++
				}
			}
			return c
		}
		var cs []tcase
		for range 3 {
			l := append(randList(r, 3, 0, hi+5), hi)
			cs = append(cs, tcase{[]val{l}, count(l)})
		}
		vis := []int{lo, lo + 1, hi + 9}
		L, H := strconv.Itoa(lo), strconv.Itoa(hi)
		return fn{name: name,
			py:    "def {f}(values):\n    return sum(1 for v in values if " + L + " <= v <= " + H + ")\n",
			pyBug: "def {f}(values):\n    return sum(1 for v in values if " + L + " <= v < " + H + ")\n",
			goSrc: "func {F}(values []int) int {\n\tn := 0\n\tfor _, v := range values {\n\t\tif " + L + " <= v && v <= " + H + " {\n\t\t\tn++\n\t\t}\n\t}\n\treturn n\n}\n",
			goBug: "func {F}(values []int) int {\n\tn := 0\n\tfor _, v := range values {\n\t\tif " + L + " <= v && v < " + H + " {\n\t\t\tn++\n\t\t}\n\t}\n\treturn n\n}\n",
			cases: cs, visibleOK: []tcase{{[]val{vis}, count(vis)}},
			statement: fmt.Sprintf("`{f}` should count the values between %d and %d, both ends included, but `{call}` does not return {want}.", lo, hi),
		}
	}},
	// wrong_constant
	{"wrong_constant", "units", func(r *rand.Rand, name string) fn {
		units := []struct {
			from, to string
			k        int
		}{{"hours", "minutes", 60}, {"days", "hours", 24}, {"weeks", "days", 7}, {"kilometres", "metres", 1000}, {"dozens", "items", 12}, {"minutes", "seconds", 60}, {"feet", "inches", 12}}
		u := units[r.IntN(len(units))]
		bad := u.k + []int{-1, 1, -2, 10, u.k}[r.IntN(5)]
		constName := strings.ToUpper(u.to) + "_PER_" + strings.ToUpper(strings.TrimSuffix(u.from, "s"))
		goConst := strings.ToUpper(u.to[:1]) + u.to[1:] + "Per" + strings.ToUpper(u.from[:1]) + strings.TrimSuffix(u.from[1:], "s")
		var cs []tcase
		for range 3 {
			x := 1 + r.IntN(30)
			cs = append(cs, tcase{[]val{x}, x * u.k})
		}
		return fn{name: name,
			pyPre: fmt.Sprintf("%s = %d\n", constName, u.k), pyPreBug: fmt.Sprintf("%s = %d\n", constName, bad),
			goPre:    fmt.Sprintf("// %s is how many %s make one %s.\nconst %s = %d\n", goConst, u.to, strings.TrimSuffix(u.from, "s"), goConst, u.k),
			goPreBug: fmt.Sprintf("// %s is how many %s make one %s.\nconst %s = %d\n", goConst, u.to, strings.TrimSuffix(u.from, "s"), goConst, bad),
			py:       "def {f}(amount):\n    return amount * " + constName + "\n",
			goSrc:    "func {F}(amount int) int {\n\treturn amount * " + goConst + "\n}\n",
			cases:    cs, visibleOK: []tcase{{[]val{0}, 0}},
			statement: fmt.Sprintf("`{f}` converts %s to %s, but the result is wrong: `{call}` should return {want}.", u.from, u.to),
		}
	}},
	{"wrong_constant", "fee", func(r *rand.Rand, name string) fn {
		fee := 2 + r.IntN(20)
		bad := fee + 1 + r.IntN(5)
		var cs []tcase
		for range 3 {
			x := 10 + r.IntN(200)
			cs = append(cs, tcase{[]val{x}, x + fee})
		}
		return fn{name: name,
			pyPre: fmt.Sprintf("SERVICE_FEE = %d\n", fee), pyPreBug: fmt.Sprintf("SERVICE_FEE = %d\n", bad),
			goPre: fmt.Sprintf("// ServiceFee is added to every order.\nconst ServiceFee = %d\n", fee), goPreBug: fmt.Sprintf("// ServiceFee is added to every order.\nconst ServiceFee = %d\n", bad),
			py:        "def {f}(amount):\n    return amount + SERVICE_FEE\n",
			goSrc:     "func {F}(amount int) int {\n\treturn amount + ServiceFee\n}\n",
			cases:     cs,
			statement: fmt.Sprintf("The service fee is %d, so `{f}` should add %d to an amount, but `{call}` does not return {want}.", fee, fee),
		}
	}},
	// missing_case
	{"missing_case", "sign", func(r *rand.Rand, name string) fn {
		return fn{name: name,
			py:        "def {f}(n):\n    if n < 0:\n        return \"negative\"\n    if n == 0:\n        return \"zero\"\n    return \"positive\"\n",
			pyBug:     "def {f}(n):\n    if n < 0:\n        return \"negative\"\n    return \"positive\"\n",
			goSrc:     "func {F}(n int) string {\n\tif n < 0 {\n\t\treturn \"negative\"\n\t}\n\tif n == 0 {\n\t\treturn \"zero\"\n\t}\n\treturn \"positive\"\n}\n",
			goBug:     "func {F}(n int) string {\n\tif n < 0 {\n\t\treturn \"negative\"\n\t}\n\treturn \"positive\"\n}\n",
			cases:     []tcase{{[]val{0}, "zero"}},
			visibleOK: []tcase{{[]val{-1 - r.IntN(50)}, "negative"}, {[]val{1 + r.IntN(50)}, "positive"}},
			statement: "`{f}` should classify a number as \"negative\", \"zero\" or \"positive\", but `{call}` does not return {want}.",
		}
	}},
	{"missing_case", "divide", func(r *rand.Rand, name string) fn {
		a := 10 + r.IntN(90)
		b := 1 + r.IntN(9)
		return fn{name: name,
			py:        "def {f}(a, b):\n    if b == 0:\n        return 0\n    return a // b\n",
			pyBug:     "def {f}(a, b):\n    return a // b\n",
			goSrc:     "func {F}(a, b int) int {\n\tif b == 0 {\n\t\treturn 0\n\t}\n\treturn a / b\n}\n",
			goBug:     "func {F}(a, b int) int {\n\treturn a / b\n}\n",
			cases:     []tcase{{[]val{a, 0}, 0}},
			visibleOK: []tcase{{[]val{a, b}, a / b}},
			statement: "`{f}(a, b)` divides a by b and should return 0 when b is 0, but `{call}` fails instead of returning {want}.",
		}
	}},
	// wrong_call
	{"wrong_call", "scale", func(r *rand.Rand, name string) fn {
		k := 2 + r.IntN(5)
		x := 3 + r.IntN(20)
		K := strconv.Itoa(k)
		return fn{name: name,
			pyPre:     "def scale_up(x):\n    return x * " + K + "\n\n\ndef scale_down(x):\n    return x // " + K + "\n\n\n",
			goPre:     "func scaleUp(x int) int { return x * " + K + " }\n\nfunc scaleDown(x int) int { return x / " + K + " }\n\n",
			py:        "def {f}(x):\n    return scale_up(x) + 1\n",
			pyBug:     "def {f}(x):\n    return scale_down(x) + 1\n",
			goSrc:     "func {F}(x int) int {\n\treturn scaleUp(x) + 1\n}\n",
			goBug:     "func {F}(x int) int {\n\treturn scaleDown(x) + 1\n}\n",
			cases:     []tcase{{[]val{x}, x*k + 1}, {[]val{x + 5}, (x+5)*k + 1}},
			visibleOK: []tcase{{[]val{0}, 1}},
			statement: fmt.Sprintf("`{f}(x)` should scale x up by %d and add 1, but `{call}` does not return {want}.", k),
		}
	}},
	{"wrong_call", "upper", func(r *rand.Rand, name string) fn {
		words := []string{"hello", "report", "alpha", "green", "matrix", "signal", "vector"}
		w := words[r.IntN(len(words))]
		return fn{name: name,
			py:        "def {f}(text):\n    return text.strip().upper()\n",
			pyBug:     "def {f}(text):\n    return text.strip().lower()\n",
			goImports: []string{"strings"},
			goSrc:     "func {F}(text string) string {\n\treturn strings.ToUpper(strings.TrimSpace(text))\n}\n",
			goBug:     "func {F}(text string) string {\n\treturn strings.ToLower(strings.TrimSpace(text))\n}\n",
			cases:     []tcase{{[]val{" " + w + " "}, strings.ToUpper(w)}, {[]val{"Mixed Case"}, "MIXED CASE"}},
			visibleOK: []tcase{{[]val{"  42 "}, "42"}},
			statement: "`{f}` should trim a label and turn it to upper case, but `{call}` does not return {want}.",
		}
	}},
	// swapped_args (held out)
	{"swapped_args", "difference", func(r *rand.Rand, name string) fn {
		m := 2 + r.IntN(4)
		a, b := 20+r.IntN(30), 1+r.IntN(15)
		M := strconv.Itoa(m)
		return fn{name: name,
			pyPre:     "def difference(a, b):\n    return a - b\n\n\n",
			goPre:     "func difference(a, b int) int { return a - b }\n\n",
			py:        "def {f}(x, y):\n    return difference(x, y) * " + M + "\n",
			pyBug:     "def {f}(x, y):\n    return difference(y, x) * " + M + "\n",
			goSrc:     "func {F}(x, y int) int {\n\treturn difference(x, y) * " + M + "\n}\n",
			goBug:     "func {F}(x, y int) int {\n\treturn difference(y, x) * " + M + "\n}\n",
			cases:     []tcase{{[]val{a, b}, (a - b) * m}, {[]val{b, a}, (b - a) * m}},
			visibleOK: []tcase{{[]val{a, a}, 0}},
			statement: fmt.Sprintf("`{f}(x, y)` should return (x - y) * %d, but `{call}` does not return {want}.", m),
		}
	}},
	{"swapped_args", "power", func(r *rand.Rand, name string) fn {
		e := 2 + r.IntN(2)
		E := strconv.Itoa(e)
		pow := func(b, e int) int {
			p := 1
			for range e {
				p *= b
			}
			return p
		}
		b1, b2 := 4+r.IntN(3), 7+r.IntN(3)
		return fn{name: name,
			pyPre:     "def power(base, exp):\n    return base ** exp\n\n\n",
			goPre:     "func power(base, exp int) int {\n\tp := 1\n\tfor i := 0; i < exp; i++ {\n\t\tp *= base\n\t}\n\treturn p\n}\n\n",
			py:        "def {f}(x):\n    return power(x, " + E + ")\n",
			pyBug:     "def {f}(x):\n    return power(" + E + ", x)\n",
			goSrc:     "func {F}(x int) int {\n\treturn power(x, " + E + ")\n}\n",
			goBug:     "func {F}(x int) int {\n\treturn power(" + E + ", x)\n}\n",
			cases:     []tcase{{[]val{b2}, pow(b2, e)}, {[]val{b1}, pow(b1, e)}},
			visibleOK: []tcase{{[]val{e}, pow(e, e)}},
			statement: fmt.Sprintf("`{f}(x)` should return x to the power %d, but `{call}` does not return {want}.", e),
		}
	}},
	// negated_condition (held out)
	{"negated_condition", "evens", func(r *rand.Rand, name string) fn {
		var cs []tcase
		for range 3 {
			l := randList(r, 3+r.IntN(3), 1, 30)
			c := 0
			for _, x := range l {
				if x%2 == 0 {
					c++
				}
			}
			if 2*c == len(l) {
				l = append(l, 2)
				c++
			}
			cs = append(cs, tcase{[]val{l}, c})
		}
		return fn{name: name,
			py:    "def {f}(values):\n    return sum(1 for v in values if v % 2 == 0)\n",
			pyBug: "def {f}(values):\n    return sum(1 for v in values if v % 2 != 0)\n",
			goSrc: "func {F}(values []int) int {\n\tn := 0\n\tfor _, v := range values {\n\t\tif v%2 == 0 {\n\t\t\tn++\n\t\t}\n\t}\n\treturn n\n}\n",
			goBug: "func {F}(values []int) int {\n\tn := 0\n\tfor _, v := range values {\n\t\tif v%2 != 0 {\n\t\t\tn++\n\t\t}\n\t}\n\treturn n\n}\n",
			cases: cs, visibleOK: []tcase{{[]val{[]int{1, 2}}, 1}},
			statement: "`{f}` should count the even numbers, but `{call}` does not return {want}.",
		}
	}},
}

// HeldoutFamilies are never in the train or held-out-instance splits.
var HeldoutFamilies = map[string]bool{"swapped_args": true, "negated_condition": true}

// fillers are correct functions that give each module PASS_TO_PASS tests.
var fillers = []func(r *rand.Rand, name string) fn{
	func(r *rand.Rand, name string) fn {
		lo, hi := r.IntN(5), 10+r.IntN(50)
		L, H := strconv.Itoa(lo), strconv.Itoa(hi)
		return fn{name: name,
			py:    "def {f}(x):\n    return max(" + L + ", min(x, " + H + "))\n",
			goSrc: "func {F}(x int) int {\n\treturn max(" + L + ", min(x, " + H + "))\n}\n",
			cases: []tcase{{[]val{hi + 3}, hi}, {[]val{lo + 1}, lo + 1}},
		}
	},
	func(r *rand.Rand, name string) fn {
		return fn{name: name,
			py:    "def {f}(values):\n    return sum(1 for v in values if v > 0)\n",
			goSrc: "func {F}(values []int) int {\n\tn := 0\n\tfor _, v := range values {\n\t\tif v > 0 {\n\t\t\tn++\n\t\t}\n\t}\n\treturn n\n}\n",
			cases: []tcase{{[]val{[]int{-1, 2, 3}}, 2}, {[]val{randList(r, 2, -9, -1)}, 0}},
		}
	},
	func(r *rand.Rand, name string) fn {
		k := 2 + r.IntN(8)
		x := r.IntN(40)
		return fn{name: name,
			py:    "def {f}(x):\n    return x * " + strconv.Itoa(k) + "\n",
			goSrc: "func {F}(x int) int {\n\treturn x * " + strconv.Itoa(k) + "\n}\n",
			cases: []tcase{{[]val{x}, x * k}, {[]val{-x}, -x * k}},
		}
	},
	func(r *rand.Rand, name string) fn {
		a := []string{"red", "blue", "green", "amber"}[r.IntN(4)]
		return fn{name: name,
			py:    "def {f}(a, b):\n    return a + \"-\" + b\n",
			goSrc: "func {F}(a, b string) string {\n\treturn a + \"-\" + b\n}\n",
			cases: []tcase{{[]val{a, "x"}, a + "-x"}, {[]val{"", a}, "-" + a}},
		}
	},
}
