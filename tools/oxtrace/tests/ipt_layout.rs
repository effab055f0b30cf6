//! The `<intel-pt.h>` layouts and values `oxtrace::ipt` relies on, checked against the
//! installed header (Debian libipt-dev, installed by scripts/setup-toolchain.sh).

use std::process::Command;

#[test]
fn libipt_layouts_match_the_header() {
    let dir = std::env::temp_dir().join(format!("oxt-ipt-layout-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let src = dir.join("probe.c");
    std::fs::write(
        &src,
        r#"#include <intel-pt.h>
#include <stdio.h>
#include <string.h>
int main(void)
{
	struct pt_packet p;
	unsigned char *b = (unsigned char *)&p;
	size_t i, ip = 0;
	memset(&p, 0, sizeof(p));
	p.payload.ptw.ip = 1;
	for (i = 0; i < sizeof(p); i++)
		if (b[i])
			ip = i;
	printf("%zu %zu %zu %zu %zu %zu %zu %d %d %d %d %d %d %d\n", sizeof(struct pt_config),
	       sizeof(struct pt_packet), __builtin_offsetof(struct pt_packet, payload),
	       __builtin_offsetof(struct pt_packet, payload.tsc.tsc),
	       __builtin_offsetof(struct pt_packet, payload.ptw.payload),
	       __builtin_offsetof(struct pt_packet, payload.ptw.plc), ip, ppt_pad, ppt_psb,
	       ppt_psbend, ppt_tsc, ppt_ovf, ppt_ptw, pte_eos);
	return 0;
}
"#,
    )
    .unwrap();
    let exe = dir.join("probe");
    let cc = Command::new("cc")
        .arg(&src)
        .arg("-o")
        .arg(&exe)
        .output()
        .expect("cc");
    assert!(
        cc.status.success(),
        "cannot compile against <intel-pt.h> (libipt-dev): {}",
        String::from_utf8_lossy(&cc.stderr)
    );
    let out = Command::new(&exe).output().unwrap();
    let got: Vec<u64> = String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .map(|w| w.parse().unwrap())
        .collect();
    use oxtrace::pt::ipt::*;
    let (plc, ip) = PTW_PLC_IP_BYTES;
    let mut want = vec![
        PT_CONFIG_SIZE as u64,
        PT_PACKET_SIZE as u64,
        8, // payload: word 1
        8, // tsc.tsc
        8, // ptw.payload
        plc as u64,
        ip as u64,
    ];
    want.extend(PPT.iter().map(|&v| v as u64));
    want.push(PTE_EOS as u64);
    assert_eq!(got, want);
    let _ = std::fs::remove_dir_all(&dir);
}
