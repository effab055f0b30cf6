/*
 * Latency of read(2) in the kernel, per process, as a power-of-two histogram:
 * the classic thread-local timestamp pattern.
 */
#pragma D option quiet

fbt::ksys_read:entry
{
	self->ts = timestamp;
}

fbt::ksys_read:return
/self->ts/
{
	@ns[execname] = quantize(timestamp - self->ts);
	@bytes = sum(arg1);
	self->ts = 0;
}

END
{
	printf("read(2) latency in ns, by process:\n");
	printa(@ns);
	printa("total bytes read: %@d\n", @bytes);
}
