// fuzz.c: the libFuzzer target of the sandbox init's request decoder
// (decode in init.c, which reads every request from the host), built with
// clang -fsanitize=fuzzer,address,undefined by make init-fuzz (a bounded
// run, part of make test) and make fuzz (a longer one). Its seed corpus,
// corpus/, is the encoding of every sample message of the protocol
// (initproc.Samples, checked by initproc's TestFuzzCorpus).
//
// Besides what the sanitizers catch, it checks what the init relies on in
// a decoded message: every string ends within the input and with a NUL,
// and the argument and environment lists end with NULL, ready for execve.

#define main legorl_init_main
#include "init.c"
#undef main

static void check_str(const char *s, size_t size) {
	if (!s || strlen(s) > size) __builtin_trap();
}

static void check_strs(const struct strs *s, size_t size) {
	if (!s->v || s->v[s->n] != NULL || s->n > size) __builtin_trap();
	for (size_t i = 0; i < s->n; i++) check_str(s->v[i], size);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
	struct msg m;
	if (decode(data, size, &m) != 0) return 0;
	if (m.op < 0 || m.op > 255) __builtin_trap();
	if (m.has_setup) {
		check_str(m.workspace, size);
		if (m.nmounts > size) __builtin_trap();
		for (size_t i = 0; i < m.nmounts; i++) check_str(m.mounts[i].target, size);
	}
	check_strs(&m.args, size);
	check_strs(&m.env, size);
	check_str(m.dir, size);
	check_str(m.version, size);
	check_str(m.error, size);
	msg_free(&m);
	return 0;
}
