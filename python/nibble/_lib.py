"""libnibble.so through ctypes: finding the library, the public structs of nibble.h, the
prototypes of the functions this package calls, and the one error type.

Only functions declared NB_API in include/nibble.h are used (the library exports nothing
else: tools/check_exports.py). The structs mirror the header field for field; the
versioned ones (those that start with `size`) are always obtained from the library's
*_default_params() so that their `size` and defaults are the library's own.
"""

import ctypes
import ctypes.util
import os
import threading

# enum nb_status
NB_OK = 0
NB_ERR_IO = 1
NB_ERR_FORMAT = 2
NB_ERR_UNSUPPORTED = 3
NB_ERR_INVALID_ARG = 4
NB_ERR_NOMEM = 5
NB_ERR_NOT_FOUND = 6
NB_ERR_RANGE = 7
NB_ERR_INTERNAL = 8

# enum nb_stopped_by
NB_STOPPED_LENGTH = 0
NB_STOPPED_EOG = 1
NB_STOPPED_CALLBACK = 2
NB_STOPPED_CONTEXT = 3

# enum nb_text_event
NB_TEXT_ERROR = -1
NB_TEXT_MORE = 0
NB_TEXT_EOG = 1
NB_TEXT_STOP = 2

# enum nb_log_level
NB_LOG_ERROR = 0
NB_LOG_WARN = 1


class NibbleError(Exception):
    """A failure reported by libnibble: `status` is the C enum nb_status (an int; None
    when the library itself could not be loaded), `status_name` its short name ("i/o
    error", ...), and the message is nb_last_error()'s text ("/x.gguf: no such file")."""

    def __init__(self, message, status=None, status_name=None):
        super().__init__(message)
        self.message = message
        self.status = status
        self.status_name = status_name

    def __repr__(self):
        return f"NibbleError({self.message!r}, status={self.status!r})"


# ---------------------------------------------------------------- structs (nibble.h)

c_char_p = ctypes.c_char_p
c_int = ctypes.c_int
c_int32 = ctypes.c_int32
c_int64 = ctypes.c_int64
c_size_t = ctypes.c_size_t
c_void_p = ctypes.c_void_p

nb_token_cb = ctypes.CFUNCTYPE(c_int, c_int32, c_void_p)
nb_progress_fn = ctypes.CFUNCTYPE(None, c_int64, c_int64, c_void_p)


class ModelInfo(ctypes.Structure):  # struct nb_model_info (fixed layout)
    _fields_ = [("arch", c_char_p), ("source_kind", c_char_p),
                ("n_layers", c_int), ("n_embd", c_int), ("n_heads", c_int),
                ("n_kv_heads", c_int), ("head_dim", c_int), ("n_ff", c_int),
                ("n_vocab", c_int), ("n_ctx_train", c_int), ("bos_id", c_int),
                ("eos_id", c_int), ("n_params", c_int64), ("weight_path", c_char_p),
                ("linear_params", c_int64), ("linear_bytes", c_int64),
                ("weight_bytes", c_int64)]


class CtxParams(ctypes.Structure):  # struct nb_ctx_params (versioned)
    _fields_ = [("size", c_size_t), ("n_ctx", c_int), ("n_seq", c_int), ("n_batch", c_int),
                ("n_threads", c_int), ("pin", c_int), ("n_ctx_total", c_int64),
                ("kv_type", c_int)]


class SamplerParams(ctypes.Structure):  # struct nb_sampler_params (versioned)
    _fields_ = [("size", c_size_t), ("temperature", ctypes.c_float), ("top_k", c_int),
                ("top_p", ctypes.c_float), ("min_p", ctypes.c_float),
                ("repeat_penalty", ctypes.c_float), ("repeat_last_n", c_int),
                ("seed", ctypes.c_uint64), ("presence_penalty", ctypes.c_float),
                ("frequency_penalty", ctypes.c_float)]


class GenStats(ctypes.Structure):  # struct nb_gen_stats (fixed layout)
    _fields_ = [("n_prompt", c_int), ("n_gen", c_int), ("n_decode", c_int),
                ("t_prompt_s", ctypes.c_double), ("t_gen_s", ctypes.c_double),
                ("stopped_by", c_int), ("n_drafted", c_int), ("n_accepted", c_int),
                ("n_shifts", c_int), ("n_dropped", c_int), ("n_rerun", c_int),
                ("t_shift_s", ctypes.c_double)]


class SequenceParams(ctypes.Structure):  # struct nb_sequence_params (versioned)
    _fields_ = [("size", c_size_t), ("seq", c_int), ("n_ctx", c_int), ("shift", c_int),
                ("n_keep", c_int), ("max_draft", c_int)]


class TextOutParams(ctypes.Structure):  # struct nb_text_out_params (versioned)
    _fields_ = [("size", c_size_t), ("special", c_int), ("ignore_eog", c_int),
                ("stops", ctypes.POINTER(c_char_p)), ("n_stops", c_int)]


class TokenizerInfo(ctypes.Structure):  # struct nb_tokenizer_info (versioned)
    _fields_ = [("size", c_size_t), ("n_vocab", c_int), ("bos_id", c_int), ("eos_id", c_int),
                ("eot_id", c_int), ("adds_bos", c_int), ("desc", c_char_p),
                ("chat_template", c_char_p)]


class ChatMsg(ctypes.Structure):  # struct nb_chat_msg
    _fields_ = [("role", c_char_p), ("content", c_char_p)]


class SelectParams(ctypes.Structure):  # struct nb_select_params (versioned)
    _fields_ = [("size", c_size_t), ("priority", c_char_p), ("target", c_char_p),
                ("path", c_char_p), ("path_from", c_char_p), ("records_dir", c_char_p),
                ("measure_bw", c_int)]


class OpenParams(ctypes.Structure):  # struct nb_open_params (versioned)
    _fields_ = [("size", c_size_t), ("path", c_char_p), ("n_threads", c_int),
                ("use_cache", c_int), ("cache_dir", c_char_p), ("layout_rows", c_int),
                ("repack_rows", c_int64), ("progress", nb_progress_fn), ("user", c_void_p),
                ("calib_path", c_char_p), ("select", SelectParams)]


class Selection(ctypes.Structure):  # struct nb_selection (versioned)
    _fields_ = [("size", c_size_t), ("weight_path", ctypes.c_char * 16),
                ("kernel", ctypes.c_char * 64), ("kernel_run", ctypes.c_char * 32),
                ("head_bits", c_int), ("bits_per_weight", ctypes.c_double),
                ("runs_locally", c_int), ("verified", c_int),
                ("verified_by", ctypes.c_char * 128), ("priority", ctypes.c_char * 16),
                ("priority_given", c_int), ("target", ctypes.c_char * 16),
                ("n_records", c_int), ("n_reasons", c_int),
                ("reasons", (ctypes.c_char * 400) * 12), ("recipe", ctypes.c_char * 16),
                ("gptq", c_int), ("record_key", ctypes.c_char * 160)]


class OpenReport(ctypes.Structure):  # struct nb_open_report (versioned)
    _fields_ = [("size", c_size_t), ("loaded", ctypes.c_char * 4096),
                ("weight_path", ctypes.c_char * 16), ("selected", c_int),
                ("path_ignored", c_int), ("as_stored", c_int), ("fell_back", c_int),
                ("quantized", c_int), ("quantize_s", ctypes.c_double),
                ("cache_event", ctypes.c_char * 32), ("cache_waited", c_int),
                ("cache_off", c_int), ("why", ctypes.c_char * 8192), ("repacked", c_int),
                ("repack_s", ctypes.c_double), ("route", ctypes.c_char * 256),
                ("selection", Selection)]


def _returned(cls):
    """A struct type for a *_default_params() return value: cls with room after it, so a
    newer library whose struct has grown (fields are only added at the end) never writes
    past the buffer ctypes hands it."""
    return type(cls.__name__ + "Ret", (ctypes.Structure,),
                {"_fields_": [("head", cls), ("_room", ctypes.c_char * 4096)]})


_PROTOS = {
    # name: (restype, argtypes)
    "nb_status_str": (c_char_p, [c_int]),
    "nb_last_error": (c_char_p, []),
    "nb_version": (c_char_p, []),
    "nb_log_set_level": (None, [c_int]),
    "nb_model_free": (None, [c_void_p]),
    "nb_model_get_info": (None, [c_void_p, ctypes.POINTER(ModelInfo)]),
    "nb_ctx_default_params": (_returned(CtxParams), []),
    "nb_kv_type_parse": (c_int, [c_char_p]),
    "nb_ctx_init": (c_int, [ctypes.POINTER(c_void_p), c_void_p, ctypes.POINTER(CtxParams)]),
    "nb_ctx_free": (None, [c_void_p]),
    "nb_ctx_clear_seq": (None, [c_void_p, c_int]),
    "nb_ctx_n_ctx": (c_int, [c_void_p]),
    "nb_pooling_parse": (c_int, [c_char_p]),
    "nb_embed": (c_int, [c_void_p, c_int, ctypes.POINTER(c_int32), c_int, c_int,
                         ctypes.POINTER(ctypes.c_float)]),
    "nb_sampler_default_params": (_returned(SamplerParams), []),
    "nb_sampler_init": (c_int, [ctypes.POINTER(c_void_p), ctypes.POINTER(SamplerParams),
                                c_int]),
    "nb_sampler_free": (None, [c_void_p]),
    "nb_sampler_set_logit_bias": (c_int, [c_void_p, ctypes.POINTER(c_int32),
                                          ctypes.POINTER(ctypes.c_float), c_int]),
    "nb_sequence_default_params": (_returned(SequenceParams), []),
    "nb_sequence_init": (c_int, [ctypes.POINTER(c_void_p), c_void_p,
                                 ctypes.POINTER(SequenceParams)]),
    "nb_sequence_free": (None, [c_void_p]),
    "nb_sequence_generate": (c_int, [c_void_p, c_void_p, ctypes.POINTER(c_int32), c_int, c_int,
                                     c_int, nb_token_cb, c_void_p, ctypes.POINTER(GenStats)]),
    "nb_tokenizer_from_model": (c_int, [ctypes.POINTER(c_void_p), c_void_p]),
    "nb_tokenizer_free": (None, [c_void_p]),
    "nb_tokenizer_get_info": (None, [c_void_p, ctypes.POINTER(TokenizerInfo)]),
    "nb_tokenize_text": (c_int, [c_void_p, c_char_p, c_size_t, c_int, c_int,
                                 ctypes.POINTER(c_int32), c_int, ctypes.POINTER(c_int)]),
    "nb_detokenize_text": (c_int, [c_void_p, ctypes.POINTER(c_int32), c_int, c_int, c_void_p,
                                   c_size_t, ctypes.POINTER(c_size_t)]),
    "nb_token_to_piece": (c_int, [c_void_p, c_int32, c_void_p, c_size_t,
                                  ctypes.POINTER(c_size_t)]),
    "nb_tokenizer_is_eog": (c_int, [c_void_p, c_int32]),
    "nb_text_out_default_params": (_returned(TextOutParams), []),
    "nb_text_out_init": (c_int, [ctypes.POINTER(c_void_p), c_void_p,
                                 ctypes.POINTER(TextOutParams)]),
    "nb_text_out_feed": (c_int, [c_void_p, c_int32, ctypes.POINTER(ctypes.c_void_p),
                                 ctypes.POINTER(c_size_t)]),
    "nb_text_out_flush": (None, [c_void_p, ctypes.POINTER(ctypes.c_void_p),
                                 ctypes.POINTER(c_size_t)]),
    "nb_text_out_free": (None, [c_void_p]),
    "nb_chat_template_resolve": (c_int, [c_void_p, c_char_p, ctypes.POINTER(c_char_p)]),
    "nb_chat_apply": (c_int, [c_void_p, c_char_p, ctypes.POINTER(ChatMsg), c_int, c_int,
                              c_void_p, c_size_t, ctypes.POINTER(c_size_t)]),
    "nb_chat_template_render_json": (c_int, [c_void_p, c_char_p, c_char_p, c_void_p, c_size_t,
                                             ctypes.POINTER(c_size_t)]),
    "nb_open_default_params": (_returned(OpenParams), []),
    "nb_model_open": (c_int, [ctypes.POINTER(c_void_p), c_char_p, ctypes.POINTER(OpenParams),
                              ctypes.POINTER(OpenReport)]),
}

_lock = threading.Lock()
_lib = None


def _candidates():
    """Where the library is looked for, in order: $NIBBLE_LIB, beside this package, the
    system loader (LD_LIBRARY_PATH, ld.so.cache: `cmake --install` puts it in a lib
    folder), ctypes.util.find_library."""
    env = os.environ.get("NIBBLE_LIB")
    if env:
        return [env]  # asked for by name: only that one, so a wrong path is an error
    here = os.path.dirname(os.path.abspath(__file__))
    names = [os.path.join(here, n) for n in ("libnibble.so.0", "libnibble.so")
             if os.path.exists(os.path.join(here, n))]
    names.append("libnibble.so.0")
    found = ctypes.util.find_library("nibble")
    if found:
        names.append(found)
    return names


def lib():
    """The loaded library with its prototypes set (loaded on first use). NibbleError
    (status None) naming every place tried when it is not found."""
    global _lib
    with _lock:
        if _lib is not None:
            return _lib
        tried = []
        for name in _candidates():
            try:
                handle = ctypes.CDLL(name)
            except OSError as e:
                tried.append(f"{name}: {e}")
                continue
            missing = [f for f in _PROTOS if not hasattr(handle, f)]
            if missing:
                tried.append(f"{name}: lacks {', '.join(missing[:3])} (an older libnibble, or "
                             "not nibble's)")
                continue
            for fname, (restype, argtypes) in _PROTOS.items():
                fn = getattr(handle, fname)
                fn.restype = restype
                fn.argtypes = argtypes
            _lib = handle
            return _lib
        raise NibbleError(
            "libnibble.so not found: set NIBBLE_LIB to its path (a build has it at "
            "build/<preset>/libnibble.so.0) or install it (cmake --install); tried: "
            + "; ".join(tried))


def default_params(fname):
    """The struct a *_default_params() function returns, with `size` no larger than the
    struct this package knows (the library reads only the first `size` bytes)."""
    ret = getattr(lib(), fname)()
    head = ret.head
    known = ctypes.sizeof(head)
    copy = type(head).from_buffer_copy(bytes(head))
    copy.size = min(head.size, known) if head.size else known
    return copy


def error(status, what=None):
    """NibbleError for a failed call: the message of nb_last_error() (on this thread)."""
    L = lib()
    msg = (L.nb_last_error() or b"").decode("utf-8", "replace")
    if not msg:
        msg = (L.nb_status_str(status) or b"").decode()
    if what:
        msg = f"{what}: {msg}"
    return NibbleError(msg, status, (L.nb_status_str(status) or b"").decode())


def check(status, what=None):
    if status != NB_OK:
        raise error(status, what)


def grow_text(fill):
    """Call fill(buf, size, byref(len)) -> status with a buffer that grows to the length
    it asks for (the NB_ERR_RANGE contract of nb_detokenize_text and its kin); the bytes."""
    size = 4096
    for _ in range(3):
        buf = ctypes.create_string_buffer(size)
        n = c_size_t(0)
        st = fill(buf, size, ctypes.byref(n))
        if st == NB_OK:
            return buf.raw[:n.value]
        if st != NB_ERR_RANGE or n.value + 1 <= size:
            raise error(st)
        size = n.value + 1
    raise NibbleError("a text kept growing", NB_ERR_INTERNAL, "internal error")
