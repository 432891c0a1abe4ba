"""Set before anything imports jax: 8 simulated CPU devices for the pmap/mesh tests."""
import os

os.environ['XLA_FLAGS'] = ' '.join(
    [os.environ.get('XLA_FLAGS', ''), '--xla_force_host_platform_device_count=8']).strip()
os.environ.setdefault('JAX_PLATFORMS', 'cpu')
