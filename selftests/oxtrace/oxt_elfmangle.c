// SPDX-License-Identifier: GPL-2.0
/*
 * Writes a copy of an ELF executable whose section headers, symbols or USDT
 * notes lie, for uattack_test.sh: the copy still runs (exec reads only the
 * program headers and the loaded bytes), but the tool reading its symbols and
 * notes must refuse them with a message, never crash or read past the file.
 *
 *   oxt_elfmangle IN OUT MODE
 *
 *   notesz   the first USDT note's descsz is 0xfffffff0
 *   namesz   the first USDT note's namesz is 0x7ffffff0
 *   noteshort  .note.stapsdt's sh_size leaves its last note cut in two
 *   secsize  .note.stapsdt's sh_size runs far past the end of the file
 *   symsize  the size of symbol "main" runs past the end of the file
 *   shoff    the section header table starts past the end of the file
 *   truncate the file ends after its last loaded byte (no sections left)
 */
#include <elf.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static unsigned char *buf;
static size_t len;

static Elf64_Shdr *section(const char *name)
{
	Elf64_Ehdr *e = (Elf64_Ehdr *)buf;
	Elf64_Shdr *sh = (Elf64_Shdr *)(buf + e->e_shoff);
	const char *names = (const char *)buf + sh[e->e_shstrndx].sh_offset;

	for (int i = 0; i < e->e_shnum; i++)
		if (!strcmp(names + sh[i].sh_name, name))
			return &sh[i];
	fprintf(stderr, "oxt_elfmangle: no section %s\n", name);
	exit(1);
}

int main(int argc, char **argv)
{
	Elf64_Ehdr *e;
	Elf64_Shdr *s;
	const char *mode;
	FILE *f;
	size_t out_len;

	if (argc != 4) {
		fprintf(stderr, "usage: oxt_elfmangle IN OUT MODE\n");
		return 2;
	}
	mode = argv[3];
	f = fopen(argv[1], "rb");
	if (!f || fseek(f, 0, SEEK_END) || (long)(len = ftell(f)) < 0)
		return 1;
	rewind(f);
	buf = malloc(len);
	if (!buf || fread(buf, 1, len, f) != len)
		return 1;
	fclose(f);
	e = (Elf64_Ehdr *)buf;
	out_len = len;
	if (!strcmp(mode, "notesz") || !strcmp(mode, "namesz")) {
		Elf64_Nhdr *n = (Elf64_Nhdr *)(buf + section(".note.stapsdt")->sh_offset);

		if (mode[1] == 'o')
			n->n_descsz = 0xfffffff0;
		else
			n->n_namesz = 0x7ffffff0;
	} else if (!strcmp(mode, "noteshort")) {
		s = section(".note.stapsdt");
		s->sh_size -= 9;
	} else if (!strcmp(mode, "secsize")) {
		s = section(".note.stapsdt");
		s->sh_size = 0x7fff0000;
	} else if (!strcmp(mode, "symsize")) {
		Elf64_Shdr *sym = section(".symtab"), *str = section(".strtab");
		Elf64_Sym *y = (Elf64_Sym *)(buf + sym->sh_offset);
		size_t i, ns = sym->sh_size / sizeof(*y);

		for (i = 0; i < ns; i++)
			if (!strcmp((char *)buf + str->sh_offset + y[i].st_name, "main"))
				break;
		if (i == ns)
			return 1;
		y[i].st_size = 0x7ffffff0;
	} else if (!strcmp(mode, "shoff")) {
		e->e_shoff = len + 0x100000;
	} else if (!strcmp(mode, "truncate")) {
		Elf64_Phdr *p = (Elf64_Phdr *)(buf + e->e_phoff);
		size_t end = 0;

		for (int i = 0; i < e->e_phnum; i++)
			if (p[i].p_type == PT_LOAD && p[i].p_offset + p[i].p_filesz > end)
				end = p[i].p_offset + p[i].p_filesz;
		out_len = end;
	} else {
		fprintf(stderr, "oxt_elfmangle: unknown mode %s\n", mode);
		return 2;
	}
	f = fopen(argv[2], "wb");
	if (!f || fwrite(buf, 1, out_len, f) != out_len || fclose(f))
		return 1;
	return chmod(argv[2], 0755) ? 1 : 0;
}
