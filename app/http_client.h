/* app/http_client.h — a small HTTP/1.1 client for `nibble agent`: one request per
 * connection (Connection: close), plain http:// only (no TLS), a Content-Length or chunked
 * answer read whole. Enough for an OpenAI-compatible server on this machine or the LAN. */
#ifndef NB_APP_HTTP_CLIENT_H
#define NB_APP_HTTP_CLIENT_H

#include <stddef.h>

struct app_http_answer {
    int status;  /* the HTTP status (200, ...) */
    char *body;  /* malloc'd, NUL-terminated */
    size_t len;
};

/* `method` (GET or POST) `url` + `path` ("http://host:port[/prefix]" + "/v1/models"; a
 * URL that already ends in "/v1" is not given a second one); `body` is JSON (NULL: none);
 * `api_key` NULL or "" for none. Waits at most timeout_s for each read. 0 and *ans
 * filled (free ans->body), or -1 with the reason in err. */
int app_http(const char *url, const char *method, const char *path, const char *body,
             const char *api_key, double timeout_s, struct app_http_answer *ans, char *err,
             size_t errcap);

#endif
