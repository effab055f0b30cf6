// SPDX-License-Identifier: GPL-2.0
/*
 * Test harness: Intel's libipt as the reference for oxtrace's PT packets (rust/core/topa.rs).
 *
 *   ptdump dump FILE   decode FILE with libipt's packet decoder, one line per packet:
 *                      "<offset> <packet> [fields]", "<offset> end" at the end of the
 *                      buffer (or inside a truncated last packet), "<offset> error" for a
 *                      packet libipt rejects (then it resynchronises), "nosync" when no
 *                      further PSB is found.
 *   ptdump enc         read packets from stdin ("pad", "psb", "psbend", "ovf", "tsc HEX",
 *                      "ptw BYTES IP HEX"), encode them with libipt's encoder and print the
 *                      bytes in hex on one line.
 *
 * Built and run by rust/core/tests/topa_libipt.rs with `cc ptdump.c -lipt`.
 */
#include <intel-pt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int print_packet(uint64_t off, const struct pt_packet *p)
{
	switch (p->type) {
	case ppt_pad:
		return printf("%" PRIu64 " pad\n", off);
	case ppt_psb:
		return printf("%" PRIu64 " psb\n", off);
	case ppt_psbend:
		return printf("%" PRIu64 " psbend\n", off);
	case ppt_ovf:
		return printf("%" PRIu64 " ovf\n", off);
	case ppt_tsc:
		return printf("%" PRIu64 " tsc %" PRIx64 "\n", off, p->payload.tsc.tsc);
	case ppt_ptw:
		return printf("%" PRIu64 " ptw %d %u %" PRIx64 "\n", off,
			      pt_ptw_size(p->payload.ptw.plc), (unsigned)p->payload.ptw.ip,
			      p->payload.ptw.payload);
	default:
		return printf("%" PRIu64 " other %d\n", off, (int)p->type);
	}
}

static int dump(const char *path)
{
	struct pt_packet_decoder *dec;
	struct pt_config config;
	struct pt_packet pkt;
	uint8_t *buf;
	long size;
	FILE *f;

	f = fopen(path, "rb");
	if (!f || fseek(f, 0, SEEK_END) || (size = ftell(f)) < 0 || fseek(f, 0, SEEK_SET)) {
		perror(path);
		return 2;
	}
	buf = malloc(size ? size : 1);
	if (!buf || fread(buf, 1, size, f) != (size_t)size) {
		perror(path);
		return 2;
	}
	fclose(f);

	pt_config_init(&config);
	config.begin = buf;
	config.end = buf + size;
	dec = pt_pkt_alloc_decoder(&config);
	if (!dec) {
		fprintf(stderr, "pt_pkt_alloc_decoder failed\n");
		return 2;
	}
	for (;;) {
		if (pt_pkt_sync_forward(dec) < 0) {
			printf("nosync\n");
			break;
		}
		for (;;) {
			uint64_t off = 0;
			int err;

			if (pt_pkt_get_offset(dec, &off) < 0) {
				fprintf(stderr, "pt_pkt_get_offset failed\n");
				return 2;
			}
			err = pt_pkt_next(dec, &pkt, sizeof(pkt));
			if (err == -pte_eos) {
				printf("%" PRIu64 " end\n", off);
				goto out;
			}
			if (err < 0) {
				printf("%" PRIu64 " error\n", off);
				break;
			}
			print_packet(off, &pkt);
		}
	}
out:
	pt_pkt_free_decoder(dec);
	free(buf);
	return 0;
}

static int enc(void)
{
	static uint8_t buf[1 << 20];
	struct pt_encoder *encoder;
	struct pt_config config;
	char line[256];
	uint64_t end = 0;

	pt_config_init(&config);
	config.begin = buf;
	config.end = buf + sizeof(buf);
	encoder = pt_alloc_encoder(&config);
	if (!encoder) {
		fprintf(stderr, "pt_alloc_encoder failed\n");
		return 2;
	}
	while (fgets(line, sizeof(line), stdin)) {
		struct pt_packet p;
		char name[16];
		unsigned long long a = 0, b = 0, c = 0;
		int n, err;

		memset(&p, 0, sizeof(p));
		n = sscanf(line, "%15s %llx %llx %llx", name, &a, &b, &c);
		if (n < 1)
			continue;
		if (!strcmp(name, "pad")) {
			p.type = ppt_pad;
		} else if (!strcmp(name, "psb")) {
			p.type = ppt_psb;
		} else if (!strcmp(name, "psbend")) {
			p.type = ppt_psbend;
		} else if (!strcmp(name, "ovf")) {
			p.type = ppt_ovf;
		} else if (!strcmp(name, "tsc") && n == 2) {
			p.type = ppt_tsc;
			p.payload.tsc.tsc = a;
		} else if (!strcmp(name, "ptw") && n == 4) {
			p.type = ppt_ptw;
			p.payload.ptw.plc = a == 8 ? 1 : 0;
			p.payload.ptw.ip = b ? 1 : 0;
			p.payload.ptw.payload = c;
		} else {
			fprintf(stderr, "bad line: %s", line);
			return 2;
		}
		err = pt_enc_next(encoder, &p);
		if (err < 0) {
			fprintf(stderr, "pt_enc_next: %s\n", pt_errstr(pt_errcode(err)));
			return 2;
		}
	}
	if (pt_enc_get_offset(encoder, &end) < 0)
		return 2;
	for (uint64_t i = 0; i < end; i++)
		printf("%02x", buf[i]);
	printf("\n");
	pt_free_encoder(encoder);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 3 && !strcmp(argv[1], "dump"))
		return dump(argv[2]);
	if (argc == 2 && !strcmp(argv[1], "enc"))
		return enc();
	fprintf(stderr, "usage: %s dump FILE | enc\n", argv[0]);
	return 2;
}
