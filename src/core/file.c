/*
 * file.c - the one way sift opens a file it reads: configs, grammar
 * files, vocabularies (tiktoken, GGUF), and the CLI's logits and inputs.
 *
 * Owns sift__file_open and sift__file_read. Invariants:
 * - The open never blocks: O_NONBLOCK, because opening a FIFO that has no
 *   writer would otherwise wait forever (and reading one would wait for a
 *   writer that never comes). O_NOCTTY keeps a terminal device from
 *   becoming the process's controlling terminal, O_CLOEXEC keeps the
 *   descriptor out of any child a multi-threaded host forks meanwhile.
 * - Nothing is read before fstat on the opened descriptor says it is a
 *   regular file: a FIFO, a directory, a socket, a character or block
 *   device (/dev/zero, /dev/null, a tty) is SIFT_E_IO. Checking the
 *   descriptor, not the path, leaves no window for a rename between the
 *   check and the open.
 * - Reads are bounded: sift__file_read refuses a file larger than its cap
 *   before allocating, allocates the size fstat gave plus one byte, and
 *   reads at most that, so a file that grows while it is read is caught
 *   (SIFT_E_IO) instead of read without bound.
 * - Every error names the path first ("PATH: not a regular file (a
 *   FIFO)") and fills err->source with it; err->offset is -1.
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include "../sift_internal.h"

#ifndef O_CLOEXEC
#define O_CLOEXEC 0
#endif
#ifndef O_NOCTTY
#define O_NOCTTY 0
#endif

SIFT__PRINTF(4, 5)
static sift_status file_fail(sift_error *err, sift_status code, const char *path, const char *fmt,
                             ...)
{
    if (!err)
        return code;
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    sift__fail(err, code, "%s: %s", path, msg);
    sift__strlcpy_utf8(err->source, path, sizeof err->source);
    return code;
}

/* What a non-regular file is, for the message. */
static const char *kind_of(mode_t m)
{
    if (S_ISDIR(m))
        return "a directory";
    if (S_ISFIFO(m))
        return "a FIFO";
    if (S_ISCHR(m))
        return "a character device";
    if (S_ISBLK(m))
        return "a block device";
#ifdef S_ISSOCK
    if (S_ISSOCK(m))
        return "a socket";
#endif
    return "not a file";
}

sift_status sift__file_open(const char *path, uint64_t max, int *fd, uint64_t *size,
                            sift_error *err)
{
    *fd = -1;
    *size = 0;
    int f;
    do
        f = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    while (f < 0 && errno == EINTR);
    if (f < 0)
        return file_fail(err, SIFT_E_IO, path, "cannot open: %s", strerror(errno));
    struct stat st;
    if (fstat(f, &st) != 0) {
        int e = errno;
        close(f);
        return file_fail(err, SIFT_E_IO, path, "cannot stat: %s", strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        close(f);
        return file_fail(err, SIFT_E_IO, path, "not a regular file (%s)", kind_of(st.st_mode));
    }
    if (st.st_size < 0 || (uint64_t)st.st_size > max) {
        close(f);
        return file_fail(err, SIFT_E_LIMIT, path, "file is %lld bytes; max %llu",
                         (long long)st.st_size, (unsigned long long)max);
    }
    /* A regular file never blocks; clear the flag so reads are plain. */
    int fl = fcntl(f, F_GETFL);
    if (fl >= 0)
        (void)fcntl(f, F_SETFL, fl & ~O_NONBLOCK);
    *fd = f;
    *size = (uint64_t)st.st_size;
    return SIFT_OK;
}

sift_status sift__file_read(const sift__alloc *al, const char *path, size_t max, char **data,
                            size_t *len, sift_error *err)
{
    *data = NULL;
    *len = 0;
    int fd;
    uint64_t size;
    sift_status st =
        sift__file_open(path, max < SIZE_MAX - 1 ? max : SIZE_MAX - 2, &fd, &size, err);
    if (st != SIFT_OK)
        return st;
    /* size <= max < SIZE_MAX - 1, so size + 2 does not wrap. */
    size_t want = (size_t)size + 1;
    char *buf = sift__malloc(al, want + 1, 1);
    if (!buf) {
        close(fd);
        return file_fail(err, SIFT_E_NOMEM, path, "out of memory for %zu bytes", want);
    }
    size_t n = 0;
    while (n < want) {
        ssize_t r = read(fd, buf + n, want - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            int e = errno;
            close(fd);
            sift__free(al, buf);
            return file_fail(err, SIFT_E_IO, path, "read error: %s", strerror(e));
        }
        if (r == 0)
            break;
        n += (size_t)r;
    }
    close(fd);
    if (n != (size_t)size) {
        sift__free(al, buf);
        return file_fail(err, SIFT_E_IO, path, "file changed size while being read");
    }
    buf[n] = '\0';
    *data = buf;
    *len = n;
    return SIFT_OK;
}
