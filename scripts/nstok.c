// SPDX-License-Identifier: GPL-2.0-only
/*
 * nstok: the C tokenizer of nestsleep's per-file facts (a host program, as
 * the kernel's scripts/kallsyms.c is).  It gives exactly the tokens of
 * tokenize_py() in scripts/nestsleep/analysis/cfacts.py, which stays the
 * reference (scripts/tests/test_ctok.py, scripts/dev/check_ctok.py):
 *
 *   1. comments become one blank, string and character literals their two
 *      quotes, each keeping its newlines (the regex _COMMENT_STR);
 *   2. each line that starts with '#' (after blanks) is one 'pp' token,
 *      joined with its continuation lines;
 *   3. the other lines give the tokens of the regex _SIG, in its order of
 *      alternatives; the characters it does not match are skipped.
 *
 * It runs as a coprocess (analysis/ctok.py): on stdin, requests of a
 * 4-byte length and that many bytes of UTF-8 text; on stdout, for each, a
 * header of three 4-byte words (status, token count, value bytes), the
 * kinds (one byte each), the lines (4 bytes each) and the values (each
 * ending in a NUL byte).  Words are in the host's byte order.  Status 1:
 * refused, the caller tokenizes the text in Python: a byte >= 0x80 in a
 * code line (Python's \w takes non-ASCII letters) or a NUL in a
 * preprocessor line (the values' terminator).
 *
 * Build: cc -O2 -o nstok scripts/nstok.c (the Makefile's first-use).
 */
#define _GNU_SOURCE	/* memmem() */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { K_ID = 'i', K_NUM = 'n', K_OP = 'o', K_STR = 's', K_PP = 'p' };

struct buf {
	char *p;
	size_t n, cap;
};

static void die(const char *why)
{
	fprintf(stderr, "nstok: %s\n", why);
	exit(2);
}

static void reserve(struct buf *b, size_t more)
{
	if (b->n + more <= b->cap)
		return;
	while (b->n + more > b->cap)
		b->cap = b->cap ? 2 * b->cap : 65536;
	b->p = realloc(b->p, b->cap);
	if (!b->p)
		die("out of memory");
}

static void put(struct buf *b, const char *s, size_t n)
{
	reserve(b, n);
	memcpy(b->p + b->n, s, n);
	b->n += n;
}

static struct buf kinds, lines, vals;
static uint32_t ntok;

static void emit(char kind, const char *v, size_t n, uint32_t line)
{
	reserve(&kinds, 1);
	kinds.p[kinds.n++] = kind;
	put(&lines, (const char *)&line, 4);
	put(&vals, v, n);
	reserve(&vals, 1);
	vals.p[vals.n++] = 0;
	ntok++;
}

/* a literal quoted by q at s[i]: the index after its closing quote, or 0 */
static size_t literal_end(const char *s, size_t n, size_t i, char q, size_t *nl)
{
	size_t j = i + 1;

	*nl = 0;
	while (j < n) {
		char c = s[j];
		if (c == q)
			return j + 1;
		if (c == '\\') {
			if (j + 1 >= n)
				return 0;
			if (s[j + 1] == '\n')
				(*nl)++;
			j += 2;
		} else if (c == '\n') {
			return 0;
		} else {
			j++;
		}
	}
	return 0;
}

static void newlines(struct buf *o, size_t nl)
{
	reserve(o, nl);
	memset(o->p + o->n, '\n', nl);
	o->n += nl;
}

/* step 1: comments and literals blanked, newlines kept */
static void blank(const char *s, size_t n, struct buf *o)
{
	size_t i = 0, j, nl;

	o->n = 0;
	reserve(o, n + 1);
	while (i < n) {
		char c = s[i];
		if (c == '/' && i + 1 < n && s[i + 1] == '*') {
			const char *e = i + 2 < n ? memmem(s + i + 2, n - i - 2, "*/", 2) : NULL;
			if (e) {
				j = e - s + 2;
				nl = 0;
				for (size_t k = i; k < j; k++)
					nl += s[k] == '\n';
				put(o, " ", 1);
				newlines(o, nl);
				i = j;
				continue;
			}
		} else if (c == '/' && i + 1 < n && s[i + 1] == '/') {
			const char *e = memchr(s + i, '\n', n - i);
			put(o, " ", 1);
			i = e ? (size_t)(e - s) : n;
			continue;
		} else if (c == '"' || c == '\'') {
			j = literal_end(s, n, i, c, &nl);
			if (j) {
				char qq[2] = { c, c };
				put(o, qq, 2);
				newlines(o, nl);
				i = j;
				continue;
			}
		}
		put(o, &c, 1);
		i++;
	}
}

static int is_word(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

static int is_digit(unsigned char c)
{
	return c >= '0' && c <= '9';
}

static int in_set(char c, const char *set)
{
	return c && strchr(set, c);
}

static const char *const OPS[] = {
	"->", "++", "--", "<<=", ">>=", "<<", ">>", "<=", ">=", "==", "!=", "&&", "||",
};

/* the length of the operator of _SIG at s[p] (e the line's end), or 0 */
static size_t op_len(const char *s, size_t p, size_t e)
{
	size_t left = e - p;

	for (size_t k = 0; k < sizeof(OPS) / sizeof(OPS[0]); k++) {
		size_t l = strlen(OPS[k]);
		if (l <= left && !memcmp(s + p, OPS[k], l))
			return l;
	}
	if (left >= 2 && s[p + 1] == '=' && in_set(s[p], "-+*/%&|^"))
		return 2;
	if (left >= 3 && !memcmp(s + p, "...", 3))
		return 3;
	if (in_set(s[p], "{}()[];,.<>=!~?:+-*/%&|^#\"'"))
		return 1;
	return 0;
}

/* step 3: the tokens of one code line s[b..e); -1 if it holds a byte >= 0x80 */
static int code_line(const char *s, size_t b, size_t e, uint32_t line)
{
	size_t p = b, q, l;

	while (p < e) {
		unsigned char c = s[p];
		if (c >= 0x80)
			return -1;
		if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_') {
			for (q = p + 1; q < e && is_word(s[q]); q++)
				;
			emit(K_ID, s + p, q - p, line);
		} else if (is_digit(c) || (c == '.' && p + 1 < e && is_digit(s[p + 1]))) {
			for (q = p + 1 + (c == '.'); q < e && (is_word(s[q]) || s[q] == '.'); q++)
				;
			emit(K_NUM, s + p, q - p, line);
		} else if ((l = op_len(s, p, e))) {
			q = p + l;
			emit(c == '"' || c == '\'' ? K_STR : K_OP, s + p, l, line);
		} else {
			p++;
			continue;
		}
		p = q;
	}
	return 0;
}

/* the start of the '#' of a preprocessor line s[b..e), or -1 */
static long pp_start(const char *s, size_t b, size_t e)
{
	size_t k = b;

	while (k < e && (s[k] == ' ' || s[k] == '\t'))
		k++;
	if (k < e && s[k] == '#')
		return 0;	/* _PP: the token keeps the leading blanks */
	k = b;
	while (k < e && in_set(s[k], " \t\r\f\v"))
		k++;
	if (k > b && k < e && s[k] == '#')
		return (long)(k - b);
	return -1;
}

/* steps 2 and 3 over the blanked text; -1: refused */
static int tokens(const char *s, size_t n)
{
	size_t b = 0;
	uint32_t line = 0;

	while (b <= n) {
		const char *nlp = memchr(s + b, '\n', n - b);
		size_t e = nlp ? (size_t)(nlp - s) : n;
		long k;

		line++;
		if (e == b) {
			b = e + 1;
			continue;
		}
		k = pp_start(s, b, e);
		if (k >= 0) {
			size_t start = b + k, end = e;
			uint32_t first = line;
			/* continuation lines, while the token ends in a backslash */
			while (s[end - 1] == '\\' && end < n) {
				nlp = memchr(s + end + 1, '\n', n - end - 1);
				end = nlp ? (size_t)(nlp - s) : n;
				line++;
			}
			if (memchr(s + start, 0, end - start))
				return -1;
			emit(K_PP, s + start, end - start, first);
			b = end + 1;
			continue;
		}
		if (code_line(s, b, e, line) < 0)
			return -1;
		b = e + 1;
	}
	return 0;
}

static void read_all(void *p, size_t n)
{
	if (n && fread(p, 1, n, stdin) != n)
		die("short read");
}

static void write_all(const void *p, size_t n)
{
	if (n && fwrite(p, 1, n, stdout) != n)
		die("short write");
}

/*
 * nstok --ids NAMES: which of the identifiers listed in the file NAMES (one
 * a line) each file mentions, as the regex [A-Za-z_]\w* over its bytes
 * finds identifiers (analysis/wakecov.py, index()): a match starts at a
 * letter or '_' and runs over letters, digits and '_' (ASCII only, as in
 * a bytes pattern).  Paths come on stdin, one a line; for each, one line
 * on stdout: the numbers (from 0, in the order of NAMES) of the names the
 * file holds, separated by blanks, or '!' if it cannot be read.
 */
struct name {
	const char *s;
	size_t n;
	int idx;
};

static struct name *table;
static size_t tmask;

static uint32_t hash(const char *s, size_t n)
{
	uint32_t h = 2166136261u;	/* FNV-1a */

	while (n--)
		h = (h ^ (unsigned char)*s++) * 16777619u;
	return h;
}

static int lookup(const char *s, size_t n)
{
	size_t i = hash(s, n) & tmask;

	for (; table[i].s; i = (i + 1) & tmask)
		if (table[i].n == n && !memcmp(table[i].s, s, n))
			return table[i].idx;
	return -1;
}

static int is_head(unsigned char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_';
}

static void load_names(const char *path, int *count)
{
	FILE *f = fopen(path, "r");
	static struct buf all;
	char line[4096];
	size_t size = 16, i;
	int n = 0;

	if (!f)
		die("cannot read the names file");
	while (fgets(line, sizeof(line), f)) {
		size_t l = strcspn(line, "\n");

		put(&all, line, l);
		put(&all, "", 1);
		n++;
	}
	fclose(f);
	while (size < 2 * (size_t)n + 2)
		size *= 2;
	table = calloc(size, sizeof(*table));
	if (!table)
		die("out of memory");
	tmask = size - 1;
	for (i = 0, n = 0; i < all.n; n++) {
		const char *s = all.p + i;
		size_t l = strlen(s), j;

		for (j = hash(s, l) & tmask; table[j].s; j = (j + 1) & tmask)
			;
		table[j].s = s;
		table[j].n = l;
		table[j].idx = n;
		i += l + 1;
	}
	*count = n;
}

static int ids_main(const char *names)
{
	struct buf data = { 0 };
	char path[8192];
	char *seen;
	int count, k;

	load_names(names, &count);
	seen = calloc(count + 1, 1);
	if (!seen)
		die("out of memory");
	while (fgets(path, sizeof(path), stdin)) {
		FILE *f;
		size_t i, r;
		int first = 1;

		path[strcspn(path, "\n")] = 0;
		f = fopen(path, "rb");
		if (!f) {
			puts("!");
			continue;
		}
		data.n = 0;
		do {
			reserve(&data, 65536);
			r = fread(data.p + data.n, 1, 65536, f);
			data.n += r;
		} while (r > 0);
		if (ferror(f)) {
			fclose(f);
			puts("!");
			continue;
		}
		fclose(f);
		memset(seen, 0, count);
		for (i = 0; i < data.n;) {
			size_t j;

			if (!is_head(data.p[i])) {
				i++;
				continue;
			}
			for (j = i + 1; j < data.n && is_word(data.p[j]); j++)
				;
			k = lookup(data.p + i, j - i);
			if (k >= 0 && !seen[k]) {
				seen[k] = 1;
				printf(first ? "%d" : " %d", k);
				first = 0;
			}
			i = j;
		}
		putchar('\n');
	}
	fflush(stdout);
	return ferror(stdout) ? 2 : 0;
}

int main(int argc, char **argv)
{
	struct buf in = { 0 }, text = { 0 };
	uint32_t len;

	if (argc == 3 && !strcmp(argv[1], "--ids"))
		return ids_main(argv[2]);
	if (argc != 1)
		die("usage: nstok (a coprocess: see the top of nstok.c) | nstok --ids NAMES < PATHS");

	while (fread(&len, 4, 1, stdin) == 1) {
		uint32_t head[3];

		in.n = 0;
		reserve(&in, len + 1);
		read_all(in.p, len);
		blank(in.p, len, &text);
		kinds.n = lines.n = vals.n = 0;
		ntok = 0;
		head[0] = tokens(text.p, text.n) < 0;
		if (head[0])
			kinds.n = lines.n = vals.n = ntok = 0;
		head[1] = ntok;
		head[2] = vals.n;
		write_all(head, sizeof(head));
		write_all(kinds.p, kinds.n);
		write_all(lines.p, lines.n);
		write_all(vals.p, vals.n);
		fflush(stdout);
	}
	return 0;
}
