"""The worker's configuration: one frozen, typed object built once from the environment and YAML.

- :mod:`~app.stream.config.model`: the types (:class:`Settings`, :class:`StreamConfig`,
  :class:`Level`, :class:`Secret`);
- :mod:`~app.stream.config.streams`: the streams YAML file, its keys and bounds;
- :mod:`~app.stream.config.environment`: the environment (broker, secrets, ports).
"""

from app.stream.config.environment import load_settings, parse_noise_key
from app.stream.config.model import (
    DEFAULT_POPULATION,
    DEFAULT_STREAMS,
    KafkaSecurity,
    Level,
    Secret,
    Settings,
    StreamConfig,
)
from app.stream.config.streams import BOUNDS, load_streams, parse_stream

__all__ = [
    "BOUNDS",
    "DEFAULT_POPULATION",
    "DEFAULT_STREAMS",
    "KafkaSecurity",
    "Level",
    "Secret",
    "Settings",
    "StreamConfig",
    "load_settings",
    "load_streams",
    "parse_noise_key",
    "parse_stream",
]
