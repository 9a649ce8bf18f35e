"""Correctness of the relighting maths in core/shading against analytic answers."""

from __future__ import annotations

import math

import pytest
import torch
from sapiens2_studio.core.shading.relight import (
    DirectionalLight,
    backdrop_normals,
    blinn_phong_normalization,
    composite,
    direction_from_angles,
    lambert,
    linear_to_srgb,
    relight,
    srgb_to_linear,
)
from sapiens2_studio.core.shading.sh import (
    equirect_directions,
    irradiance_from_sh,
    project_equirect,
    sh_basis,
)
from sapiens2_studio.core.shading.shadows import gaussian_blur, shadow_visibility


def sphere_normals(size: int = 65) -> tuple[torch.Tensor, torch.Tensor]:
    """Analytic normals of a unit sphere seen orthographically, facing the camera (OpenCV frame)."""
    c = (torch.arange(size, dtype=torch.float64) + 0.5) / size * 2 - 1
    y, x = torch.meshgrid(c, c, indexing="ij")
    r2 = x * x + y * y
    inside = r2 < 1
    z = -torch.sqrt((1 - r2).clamp_min(0))
    n = torch.stack([x, y, z], -1) * inside[..., None]
    return n.float(), inside


def hemisphere_grid(n_theta: int = 200, n_phi: int = 400):
    """Directions of the hemisphere around (0, 0, -1) with their solid angles."""
    th = (torch.arange(n_theta, dtype=torch.float64) + 0.5) / n_theta * math.pi / 2
    ph = (torch.arange(n_phi, dtype=torch.float64) + 0.5) / n_phi * 2 * math.pi
    t, p = torch.meshgrid(th, ph, indexing="ij")
    dirs = torch.stack([torch.sin(t) * torch.cos(p), torch.sin(t) * torch.sin(p), -torch.cos(t)], -1)
    dw = torch.sin(t) * (math.pi / 2 / n_theta) * (2 * math.pi / n_phi)
    return dirs.float(), dw.float(), torch.cos(t).float()


def test_sphere_under_one_directional_light_gives_lamberts_cosine():
    normals, inside = sphere_normals()
    light = DirectionalLight.from_angles(35.0, 20.0, intensity=1.0)
    out = relight(normals, torch.ones_like(normals), lights=[light])
    l_vec = torch.tensor(direction_from_angles(35.0, 20.0))
    expected = (normals @ l_vec).clamp_min(0)
    assert torch.allclose(out.radiance[..., 0], expected, atol=1e-6)
    assert torch.allclose(out.radiance[..., 1], out.radiance[..., 2])
    # The brightest pixel is the one whose normal points at the light, and it reaches the intensity.
    idx = int(out.radiance[..., 0].argmax())
    n_best = normals.reshape(-1, 3)[idx]
    assert float(n_best @ l_vec) > 0.995
    assert float(out.radiance.max()) == pytest.approx(1.0, abs=0.01)
    # The terminator: pixels facing away from the light are black.
    away = inside & ((normals @ l_vec) < -0.05)
    assert float(out.radiance[away].abs().max()) == 0.0
    # Intensity and colour scale linearly; albedo multiplies.
    red = DirectionalLight.from_angles(35.0, 20.0, color=(1.0, 0.5, 0.0), intensity=2.0)
    out2 = relight(normals, torch.full_like(normals, 0.5), lights=[red])
    assert torch.allclose(out2.radiance[..., 0], expected, atol=1e-6)
    assert torch.allclose(out2.radiance[..., 1], 0.5 * expected, atol=1e-6)
    assert float(out2.radiance[..., 2].abs().max()) == 0.0


def test_light_angles_follow_the_image():
    # +90 azimuth lights the right side of the picture, elevation 90 lights the top (OpenCV: y down).
    assert direction_from_angles(90, 0) == pytest.approx((1, 0, 0), abs=1e-12)
    assert direction_from_angles(0, 90) == pytest.approx((0, -1, 0), abs=1e-12)
    assert direction_from_angles(0, 0) == pytest.approx((0, 0, -1), abs=1e-12)
    normals, _ = sphere_normals(33)
    shade = lambert(normals, torch.tensor(direction_from_angles(90, 0)))
    assert float(shade[16, 30]) > 0.8 and float(shade[16, 2]) == 0.0


def test_constant_environment_gives_uniform_irradiance():
    colour = torch.tensor([0.7, 0.5, 0.3])
    env = colour.expand(32, 64, 3).clone()
    coeffs = project_equirect(env)
    normals = torch.nn.functional.normalize(
        torch.randn(500, 3, generator=torch.Generator().manual_seed(0)), dim=-1
    )
    irr = irradiance_from_sh(coeffs, normals)
    assert torch.allclose(irr, math.pi * colour.expand_as(irr), rtol=2e-3)
    # A white sphere in that environment reflects exactly the environment's radiance everywhere.
    sphere, inside = sphere_normals(41)
    out = relight(sphere, torch.ones_like(sphere), sh_coeffs=coeffs)
    assert torch.allclose(out.radiance[inside], colour.expand(int(inside.sum()), 3), rtol=2e-3)


def test_equirect_solid_angles_cover_the_sphere():
    dirs, dw = equirect_directions(16, 32)
    assert float(dw.sum()) == pytest.approx(4 * math.pi, rel=1e-6)
    assert torch.allclose(dirs.norm(dim=-1), torch.ones(16, 32), atol=1e-6)
    # Layout: centre looks forward (+z), top row up (-y), three quarters across looks right (+x).
    assert dirs[7, 16].tolist() == pytest.approx([0.098, -0.098, 0.99], abs=0.02)
    assert float(dirs[0, 0, 1]) < -0.99
    assert float(dirs[8, 24, 0]) > 0.99


def test_sh_irradiance_is_exact_for_a_band_limited_environment():
    # Radiance made of l <= 2 terms has an exact closed-form irradiance.
    dirs, _ = equirect_directions(64, 128)
    x, y, z = dirs.unbind(-1)
    env = (1.0 + 0.5 * x + 0.3 * (3 * z * z - 1) - 0.2 * y)[..., None].repeat(1, 1, 3)
    coeffs = project_equirect(env, max_height=64)
    normals = torch.nn.functional.normalize(
        torch.randn(300, 3, generator=torch.Generator().manual_seed(1)), dim=-1
    )
    nx, ny, nz = normals.unbind(-1)
    expected = (
        math.pi * 1.0 + (2 * math.pi / 3) * (0.5 * nx - 0.2 * ny) + (math.pi / 4) * 0.3 * (3 * nz * nz - 1)
    )
    assert torch.allclose(irradiance_from_sh(coeffs, normals)[:, 0], expected, atol=2e-3)


def test_sh_of_a_small_bright_patch_approximates_a_directional_light():
    dirs, dw = equirect_directions(64, 128)
    target = torch.tensor(direction_from_angles(-60.0, 30.0))
    patch = (dirs @ target) > math.cos(math.radians(6))
    env = torch.zeros(64, 128, 3)
    env[patch] = 1.0 / float(dw[patch].sum())  # total power: irradiance 1 at normal incidence
    coeffs = project_equirect(env, max_height=64)
    irr = irradiance_from_sh(coeffs, target[None])[0, 0]
    assert float(irr) == pytest.approx(1.0, abs=0.12)  # order-2 SH: within ~10 % of the clamped cosine peak
    # Facing away from the patch: nearly dark (order-2 ringing is clamped at 0).
    assert float(irradiance_from_sh(coeffs, -target[None])[0, 0]) < 0.15


def test_sh_basis_is_orthonormal():
    dirs, dw = equirect_directions(96, 192, dtype=torch.float64)
    b = sh_basis(dirs)
    gram = torch.einsum("hwi,hwj,hw->ij", b, b, dw)
    assert torch.allclose(gram, torch.eye(9, dtype=torch.float64), atol=2e-3)


@pytest.mark.parametrize("specular", [0.0, 0.5, 1.0])
@pytest.mark.parametrize("shininess", [1.0, 16.0, 200.0])
def test_reflected_energy_never_exceeds_incident(specular, shininess):
    """Directional albedo (reflected / incident energy) of the full BRDF stays <= 1 at every incidence."""
    dirs, dw, cos_v = hemisphere_grid()
    normals = torch.tensor([0.0, 0.0, -1.0]).expand_as(dirs)
    albedo = torch.ones_like(dirs)
    for theta in (0.0, 30.0, 60.0, 85.0):
        light = DirectionalLight.from_angles(theta, 0.0, intensity=1.0)
        cos_l = math.cos(math.radians(theta))
        out = relight(normals, albedo, lights=[light], specular=specular, shininess=shininess, view_dirs=dirs)
        reflected = float((out.radiance[..., 0] * cos_v * dw).sum())
        incident = math.pi * cos_l  # irradiance of intensity 1 in our units (white Lambert reflects 1)
        ratio = reflected / incident
        assert ratio <= 1.0 + 5e-3, (theta, ratio)
        if specular == 0.0:
            assert ratio == pytest.approx(1.0, abs=5e-3)  # pure Lambert conserves exactly


def test_blinn_phong_normalisation_conserves_energy_at_normal_incidence():
    dirs, dw, cos_v = hemisphere_grid(400, 400)
    for s in (0.0, 4.0, 64.0):
        h = torch.nn.functional.normalize(dirs + torch.tensor([0.0, 0.0, -1.0]), dim=-1)
        lobe = blinn_phong_normalization(s) * (h[..., 2].neg().clamp_min(0) ** s)
        assert float((lobe * cos_v * dw).sum()) == pytest.approx(1.0, abs=5e-3)


def test_many_bright_lights_stay_bounded_by_their_sum():
    normals = torch.nn.functional.normalize(
        torch.randn(64, 64, 3, generator=torch.Generator().manual_seed(3)), dim=-1
    )
    lights = [
        DirectionalLight.from_angles(a, e, intensity=3.0) for a, e in [(0, 0), (40, 10), (-70, 50), (180, 0)]
    ]
    out = relight(
        normals, torch.ones_like(normals), lights=lights, specular=0.7, shininess=500.0, ambient=(0.1,) * 3
    )
    assert torch.isfinite(out.radiance).all()
    # Each light adds at most its intensity times the lobe peak (specular peak = k(s)*pi at n=h).
    peak = 0.3 * 1.0 + 0.7 * blinn_phong_normalization(500.0) * math.pi
    assert float(out.radiance.max()) <= 4 * 3.0 * peak + 0.1 + 1e-4
    assert float(out.radiance.min()) >= 0.0


def test_visibility_shadows_only_its_light():
    normals, _ = sphere_normals(33)
    lights = [DirectionalLight.from_angles(0, 0), DirectionalLight.from_angles(60, 0)]
    vis = torch.ones(2, 33, 33)
    vis[1] = 0.0
    out = relight(normals, torch.ones_like(normals), lights=lights, visibility=vis)
    alone = relight(normals, torch.ones_like(normals), lights=lights[:1])
    assert torch.allclose(out.radiance, alone.radiance)
    with pytest.raises(ValueError, match="visibility has 1 layers for 2 lights"):
        relight(normals, torch.ones_like(normals), lights=lights, visibility=vis[:1])


def test_srgb_round_trip_and_composite():
    x = torch.linspace(0, 1, 101)
    assert torch.allclose(linear_to_srgb(srgb_to_linear(x)), x, atol=1e-5)
    assert float(srgb_to_linear(torch.tensor(0.5))) == pytest.approx(0.21404, abs=1e-4)
    fg, bg = torch.ones(4, 4, 3), torch.zeros(4, 4, 3)
    mask = torch.zeros(4, 4)
    mask[:, 2:] = 0.25
    out = composite(fg, bg, mask)
    assert float(out[0, 0, 0]) == 0.0 and float(out[0, 3, 1]) == pytest.approx(0.25)
    n = backdrop_normals(8, 12)
    assert torch.allclose(n.norm(dim=-1), torch.ones(8, 12), atol=1e-6)
    assert float(n[..., 2].max()) < 0  # faces the camera everywhere
    assert float(n[4, 11, 0]) > 0 > float(n[4, 0, 0])  # right side faces right


def wall_and_ball(size=96, f=80.0):
    """Pointmap of a wall at z=2 m with a ball (r=0.2 m) in front of it at z=1.5 m (perspective camera)."""
    c = (torch.arange(size, dtype=torch.float64) + 0.5 - size / 2) / f
    y, x = torch.meshgrid(c, c, indexing="ij")
    rays = torch.stack([x, y, torch.ones_like(x)], -1)
    centre, radius = torch.tensor([0.0, 0.0, 1.5], dtype=torch.float64), 0.2
    # Ray-sphere: |t r - C|^2 = R^2
    a = (rays * rays).sum(-1)
    b = -2 * (rays @ centre)
    cc = float(centre @ centre) - radius**2
    disc = b * b - 4 * a * cc
    t_ball = (-b - torch.sqrt(disc.clamp_min(0))) / (2 * a)
    on_ball = disc > 0
    t = torch.where(on_ball, t_ball, torch.full_like(t_ball, 2.0))
    return (rays * t[..., None]), on_ball, (f, f, size / 2, size / 2), centre, radius


def test_shadow_of_a_ball_on_a_wall_matches_ray_tracing():
    points, on_ball, intr, centre, radius = wall_and_ball()
    light = torch.tensor(direction_from_angles(-40.0, 30.0), dtype=torch.float64)
    vis = shadow_visibility(points.float(), light.float(), intr, steps=96, max_distance=1.0, thickness=0.45)
    # Exact answer for wall points: does the ray towards the light hit the ball?
    p = points[~on_ball]
    oc = p - centre
    b = (oc * light).sum(-1)
    c = (oc * oc).sum(-1) - radius**2
    hit = (b * b - c > 0) & (-b - torch.sqrt((b * b - c).clamp_min(0)) > 0)
    predicted_lit = vis[~on_ball] > 0.5
    agreement = float((predicted_lit == ~hit).float().mean())
    assert int(hit.sum()) > 100  # the test scene really has a shadow on the wall
    assert agreement > 0.97
    # The lit side of the ball itself is not self-shadowed.
    ball_normals = torch.nn.functional.normalize(points[on_ball] - centre, dim=-1)
    facing = (ball_normals @ light) > 0.3
    assert float(vis[on_ball][facing].mean()) > 0.97


def test_flat_wall_does_not_shadow_itself_and_degenerate_inputs():
    size, f = 48, 40.0
    c = (torch.arange(size) + 0.5 - size / 2) / f
    y, x = torch.meshgrid(c, c, indexing="ij")
    wall = torch.stack([x, y, torch.ones_like(x)], -1) * 2.0
    vis = shadow_visibility(wall, direction_from_angles(50, 40), (f, f, size / 2, size / 2))
    assert float(vis.min()) == 1.0
    empty = shadow_visibility(torch.zeros(8, 8, 3), (0, 0, -1), (8, 8, 4, 4))
    assert float(empty.min()) == 1.0
    with pytest.raises(ValueError, match=r"points must be \(H, W, 3\)"):
        shadow_visibility(torch.zeros(8, 8), (0, 0, -1), (8, 8, 4, 4))


def test_gaussian_blur_keeps_constants_and_mass():
    img = torch.full((2, 20, 30), 0.5)
    assert torch.allclose(gaussian_blur(img, 2.0), img, atol=1e-6)
    spike = torch.zeros(31, 31)
    spike[15, 15] = 1.0
    out = gaussian_blur(spike, 1.5)
    assert float(out.sum()) == pytest.approx(1.0, abs=1e-5)
    assert float(out[15, 15]) < 0.2
    assert gaussian_blur(spike, 0.0) is spike
