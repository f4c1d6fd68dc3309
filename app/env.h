/* app/env.h — the one place nibble reads its environment variables (README: the table
 * "Environment variables"). The library reads none of them: what a variable changes is
 * passed down as a parameter, so a program using libnibble behaves the same whatever its
 * NIBBLE_* environment holds (nb_open_default_params reads only XDG_CACHE_HOME and HOME,
 * for the cache folder, as app_env_cache_dir does). */
#ifndef NB_APP_ENV_H
#define NB_APP_ENV_H

#include <stddef.h>
#include <stdint.h>

#include "nibble.h"

/* At start-up, before anything else: NIBBLE_LOG (nb_log_set_level), NIBBLE_ISA and
 * NIBBLE_AMX (nb_set_isa). A bad value is warned about and ignored. */
void app_env_init(void);

/* NIBBLE_WEIGHT_PATH and NIBBLE_MEASUREMENTS into the selector's params. */
void app_env_select(struct nb_select_params *sp);
/* The calibration text GPTQ uses when a float model is first quantized: NIBBLE_CALIB
 * (empty: none), else nb_calib_default_path() (share/nibble/calib.txt of the build tree
 * or install prefix, what nb_open_default_params gives every program); NULL when there
 * is none. */
const char *app_env_calib(void);

/* NIBBLE_API_KEY (nibble serve's --api-key when not given), or NULL. */
const char *app_env_api_key(void);

/* NIBBLE_LAYOUT=rows and NIBBLE_REPACK_ROWS=N: how quantized int4 matrices are laid out. */
void app_env_layout(int *layout_rows, int64_t *repack_rows);

/* The warm-start cache folder: $XDG_CACHE_HOME/nibble, else $HOME/.cache/nibble.
 * Returns 0 (and *why says so) when neither is set. */
int app_env_cache_dir(char *out, size_t size, const char **why);

/* nibble chat's line history at a terminal: $XDG_STATE_HOME/nibble/chat_history, else
 * $HOME/.local/state/nibble/chat_history, its folder made. 0 when neither is set or the
 * folder cannot be made (chat then keeps no history across sessions). */
int app_env_chat_history(char *out, size_t size);

#endif
